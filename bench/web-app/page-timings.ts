/**
 * The web app's own timings in a real browser (Debian's Chromium through playwright-core), as scenario 11 reads
 * them: how long a view takes until what the user came for is on screen, on the page's own clock
 * (`performance.now()`, from the navigation or from just before the click), and the FHIR and `/v1` requests the
 * page made for it (Resource Timing: the slowest one's duration, from request to last byte).
 *
 * And how late a streamed reply's text reaches the page: each chunk of the `/v1/chat/completions` stream is
 * timestamped as the page's `fetch` hands it over, and each change of the conversation on screen as a
 * MutationObserver sees it; a chunk's delay is the time until the conversation shows its text.
 */
import type { Page } from 'playwright-core';

/** One view, measured. */
export interface ViewTiming {
  /** Until the view's content is on screen, ms. */
  readonly ms: number;
  /** Requests to `/fhir/` and `/v1/` the view made. */
  readonly requests: number;
  /** The slowest of them, ms (request start to response end). */
  readonly slowestRequestMs: number;
}

/**
 * Runs `act` (a navigation or a click) and resolves when `ready` (a function body run in the page, true once the
 * view shows its content) holds, polling on every animation frame.
 */
export async function timeView(page: Page, act: () => Promise<unknown>, ready: string, navigation: boolean): Promise<ViewTiming> {
  const start = navigation ? 0 : await page.evaluate(() => {
    performance.clearResourceTimings();
    return performance.now();
  });
  await act();
  const end = await untilOnScreen(page, ready);
  const requests = await page.evaluate((from) => {
    return performance
      .getEntriesByType('resource')
      .filter((entry) => entry.startTime >= from && /\/fhir\/R4\/|\/v1\//.test(entry.name))
      .map((entry) => entry.duration);
  }, start);
  return { ms: end - start, requests: requests.length, slowestRequestMs: requests.length ? Math.max(...requests) : 0 };
}

/**
 * Resolves with the page's clock once `ready` (an expression) holds, checked on every animation frame. Built here
 * and sent as a function: the app's Content-Security-Policy lets no string be evaluated in the page, which is how
 * Playwright's `waitForFunction` runs its predicate.
 */
export async function untilOnScreen(page: Page, ready: string, timeoutMs = 120_000): Promise<number> {
  const waitOnFrames = new Function(
    'timeoutMs',
    `return new Promise((resolve, reject) => {
      const started = performance.now();
      const check = () => {
        if (${ready}) resolve(performance.now());
        else if (performance.now() - started > timeoutMs) reject(new Error('Not on screen: ' + ${JSON.stringify(ready)} + ' (the page at ' + location.pathname + location.search + ')'));
        else requestAnimationFrame(check);
      };
      check();
    });`
  ) as (timeoutMs: number) => Promise<number>;
  return page.evaluate(waitOnFrames, timeoutMs);
}

/** A page script: records the arrival of every chunk of a chat completion stream and every change of the conversation log. */
export const STREAM_PROBE = `
(() => {
  const arrivals = [];
  const shown = [];
  window.__fhirgateStreamProbe = { arrivals, shown };
  const originalFetch = window.fetch.bind(window);
  window.fetch = async (input, init) => {
    const response = await originalFetch(input, init);
    const url = typeof input === 'string' ? input : input instanceof URL ? input.href : input.url;
    if (!url.includes('/v1/chat/completions') || !response.body) return response;
    const decoder = new TextDecoder();
    let buffer = '';
    let text = '';
    const probe = new TransformStream({
      transform(chunk, controller) {
        const at = performance.now();
        buffer += decoder.decode(chunk, { stream: true });
        const lines = buffer.split('\\n');
        buffer = lines.pop() ?? '';
        let added = '';
        for (const line of lines) {
          if (!line.startsWith('data: ') || line === 'data: [DONE]') continue;
          try {
            added += JSON.parse(line.slice(6)).choices?.[0]?.delta?.content ?? '';
          } catch {}
        }
        if (added) {
          text += added;
          arrivals.push({ at, text: text.trim() });
        }
        controller.enqueue(chunk);
      },
    });
    return new Response(response.body.pipeThrough(probe), { status: response.status, statusText: response.statusText, headers: response.headers });
  };
  new MutationObserver(() => {
    const log = document.querySelector('[role="log"]');
    if (log) shown.push({ at: performance.now(), text: log.textContent ?? '' });
  }).observe(document, { subtree: true, childList: true, characterData: true });
})();
`;

/** For each streamed chunk with text, ms from its arrival to the first change of the conversation that shows it. */
export async function streamDelays(page: Page): Promise<{ readonly delays: readonly number[]; readonly unseen: number }> {
  return page.evaluate(() => {
    const probe = (globalThis as unknown as { __fhirgateStreamProbe: { arrivals: { at: number; text: string }[]; shown: { at: number; text: string }[] } }).__fhirgateStreamProbe;
    const delays: number[] = [];
    let unseen = 0;
    let from = 0;
    for (const arrival of probe.arrivals) {
      let index = from;
      while (index < probe.shown.length && (probe.shown[index].at < arrival.at || !probe.shown[index].text.includes(arrival.text))) {
        index++;
      }
      if (index === probe.shown.length) {
        unseen++;
        continue;
      }
      delays.push(probe.shown[index].at - arrival.at);
      from = index;
    }
    return { delays, unseen };
  });
}
