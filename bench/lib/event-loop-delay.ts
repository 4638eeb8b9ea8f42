/**
 * The standalone host's event-loop delay, read from its `/metrics` (plugin/hosts/standalone/event-loop-delay.ts):
 * each read covers the interval since the previous one, so a scenario reads once when its measured part starts
 * (discarding what came before) and once when it ends.
 */

/** How late the host's event loop ran over an interval, in milliseconds. */
export interface EventLoopDelay {
  readonly p50Ms: number;
  readonly p99Ms: number;
  readonly maxMs: number;
}

/** Reads the host's event-loop delay since the previous read, and starts a new interval. */
export async function readEventLoopDelay(baseUrl: string, metricsToken: string): Promise<EventLoopDelay> {
  const response = await fetch(new URL('metrics', baseUrl), { headers: { authorization: `Bearer ${metricsToken}` } });
  if (!response.ok) {
    throw new Error(`${baseUrl}metrics answered ${response.status}`);
  }
  const text = await response.text();
  const seconds = (name: string): number => {
    const line = text.split('\n').find((candidate) => candidate.startsWith(`fhirgate_host_event_loop_delay_${name}{`) || candidate.startsWith(`fhirgate_host_event_loop_delay_${name} `));
    if (!line) {
      throw new Error(`${baseUrl}metrics has no event-loop delay (${name})`);
    }
    return Number(line.slice(line.lastIndexOf(' ') + 1));
  };
  return { p50Ms: seconds('p50') * 1000, p99Ms: seconds('p99') * 1000, maxMs: seconds('max') * 1000 };
}
