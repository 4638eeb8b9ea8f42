import { appErrorOf } from '../../test/support/app-error.ts';
import { InFlightTurns, isShutdownAbort } from './in-flight-turns.ts';

describe('InFlightTurns', () => {
  test('with nothing running, a drain stops nothing', async () => {
    await expect(new InFlightTurns().drain(10_000)).resolves.toEqual({ stopped: 0 });
  });

  test('a turn that ends within the grace period runs to its end, untouched', async () => {
    const turns = new InFlightTurns();
    const controller = turns.begin();
    const drained = turns.drain(10_000);
    setTimeout(() => turns.end(controller), 5);
    await expect(drained).resolves.toEqual({ stopped: 0 });
    expect(controller.signal.aborted).toBe(false);
  });

  test('a turn still running when the grace period ends is stopped, and the drain waits for it to record its reply', async () => {
    const turns = new InFlightTurns();
    const finishing = turns.begin();
    const running = turns.begin();
    let recorded = false;
    running.signal.addEventListener('abort', () => {
      // The turn records its reply, then leaves.
      setTimeout(() => {
        recorded = true;
        turns.end(running);
      }, 5);
    });
    turns.end(finishing);

    await expect(turns.drain(1)).resolves.toEqual({ stopped: 1 });
    expect(isShutdownAbort(running.signal)).toBe(true);
    expect(recorded).toBe(true);
    expect(turns.size).toBe(0);
  });

  test('once turns are being stopped, a new one is refused with 503 unavailable', async () => {
    const turns = new InFlightTurns();
    await turns.drain(0);
    const refusal = appErrorOf(() => turns.begin());
    expect(refusal).toMatchObject({ code: 'unavailable', status: 503, isRetryable: true, retryAfterSeconds: 1 });
  });

  test('a client leaving aborts without the shutdown reason', () => {
    const controller = new InFlightTurns().begin();
    controller.abort();
    expect(isShutdownAbort(controller.signal)).toBe(false);
  });
});
