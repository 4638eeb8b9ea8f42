// The /_emulator endpoints: the control surface for a gateway, benchmark or chaos suite running in another
// process, mirroring the in-process setBehaviour / enqueue / received / reset.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { InvalidBehaviourError, parseBehaviour } from './behaviour.ts';
import { resetState } from './emulator-state.ts';
import type { EmulatorState } from './emulator-state.ts';
import { readBody, sendJson } from './http-io.ts';

/**
 * Serves one control request:
 * - `POST /_emulator/behaviour` (a behaviour) sets the default;
 * - `POST /_emulator/enqueue` (a behaviour or a list) queues behaviours for the next requests;
 * - `GET /_emulator/requests` lists `{requests, totals}`;
 * - `POST /_emulator/reset` resets as `reset()` does.
 */
export async function handleControlRequest(
  state: EmulatorState,
  request: IncomingMessage,
  response: ServerResponse,
  pathname: string,
): Promise<void> {
  const route = `${request.method} ${pathname}`;
  if (route === 'GET /_emulator/requests') {
    sendJson(response, 200, {}, JSON.stringify({ requests: state.log.received, totals: state.log.totals }));
    return;
  }
  if (route === 'POST /_emulator/reset') {
    request.resume();
    resetState(state);
    sendJson(response, 200, {}, '{"reset":true}');
    return;
  }
  if (route !== 'POST /_emulator/behaviour' && route !== 'POST /_emulator/enqueue') {
    request.resume();
    sendJson(response, 404, {}, JSON.stringify({ error: { message: `No control route ${route}` } }));
    return;
  }
  try {
    const body: unknown = JSON.parse(await readBody(request));
    if (route === 'POST /_emulator/behaviour') {
      state.defaultBehaviour = parseBehaviour(body);
      sendJson(response, 200, {}, JSON.stringify({ behaviour: state.defaultBehaviour }));
    } else {
      // One behaviour or a list, so a chaos script can queue a whole scenario in one call.
      const behaviours = (Array.isArray(body) ? body : [body]).map(parseBehaviour);
      state.queue.push(...behaviours);
      sendJson(response, 200, {}, JSON.stringify({ queued: state.queue.length }));
    }
  } catch (error) {
    if (!(error instanceof InvalidBehaviourError) && !(error instanceof SyntaxError)) {
      throw error;
    }
    sendJson(response, 400, {}, JSON.stringify({ error: { message: error.message } }));
  }
}
