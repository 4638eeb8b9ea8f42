/** Polls `probe` every 25 ms until it returns a value; fails after `timeoutMs`. */
export async function waitFor<T>(probe: () => Promise<T | undefined>, timeoutMs = 5000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) {
      return value;
    }
    if (Date.now() > deadline) {
      throw new Error('Timed out waiting');
    }
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}
