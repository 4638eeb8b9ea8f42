import { AsyncMutex } from './async-mutex.ts';

describe('AsyncMutex', () => {
  test('runs holders one at a time, in the order they asked', async () => {
    const mutex = new AsyncMutex();
    const events: string[] = [];
    const work = (name: string) => async (): Promise<string> => {
      events.push(`${name} start`);
      await new Promise((resolve) => setTimeout(resolve, 5));
      events.push(`${name} end`);
      return name;
    };
    const results = await Promise.all(['a', 'b', 'c'].map((name) => mutex.runExclusive(work(name))));
    expect(results).toEqual(['a', 'b', 'c']);
    expect(events).toEqual(['a start', 'a end', 'b start', 'b end', 'c start', 'c end']);
    expect(mutex.isLocked).toBe(false);
  });

  test('a holder that throws releases the lock', async () => {
    const mutex = new AsyncMutex();
    await expect(
      mutex.runExclusive(() => {
        throw new Error('failed');
      })
    ).rejects.toThrow('failed');
    expect(mutex.isLocked).toBe(false);
    expect(await mutex.runExclusive(() => 'next')).toBe('next');
  });

  test('isLocked while held and while others wait; releasing twice is harmless', async () => {
    const mutex = new AsyncMutex();
    const release = await mutex.acquire();
    expect(mutex.isLocked).toBe(true);
    const waiting = mutex.acquire();
    release();
    release();
    const releaseSecond = await waiting;
    expect(mutex.isLocked).toBe(true);
    releaseSecond();
    expect(mutex.isLocked).toBe(false);
  });
});
