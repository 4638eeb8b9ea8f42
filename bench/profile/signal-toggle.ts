/** The SIGUSR2 switch the profiling preloads share: the first signal starts, the next stops, and so on. */

/** Calls `start` on the first SIGUSR2, `stop` on the next, and so on; a signal that comes while one runs is ignored. */
export function toggleOnSignal(start: () => Promise<void>, stop: () => Promise<void>): void {
  let running = false;
  let busy = false;
  process.on('SIGUSR2', () => {
    if (busy) return;
    busy = true;
    const step = running ? stop : start;
    void step()
      .then(() => {
        running = !running;
      })
      .finally(() => {
        busy = false;
      });
  });
}
