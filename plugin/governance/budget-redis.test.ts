import { randomUUID } from 'node:crypto';
import type { HostRedis } from '../host.ts';
import { connectTestRedis, describeWithRedis } from '../../test/support/redis.ts';
import { runScript, script } from './budget-redis.ts';

describeWithRedis('budget scripts on a real Redis', () => {
  test('the first run sends the text, later runs name it by SHA-1, and a Redis that lost it gets it again: a new Redis sees no NOSCRIPT', async () => {
    const redis = connectTestRedis();
    const sent: string[] = [];
    const errors: string[] = [];
    // The client as a host hands it over, watched: every command sent and every error reply, as Medplum's server logs them.
    const watched: HostRedis = {
      get status() {
        return redis.status;
      },
      defineCommand: () => undefined,
      multi: () => redis.multi(),
      call: async (command, ...args) => {
        sent.push(command);
        try {
          return await redis.call(command, ...args);
        } catch (error) {
          errors.push(String(error));
          throw error;
        }
      },
    };
    try {
      await redis.ping();
      // A script no Redis has seen: a comment makes its SHA-1 new.
      const lua = script(`-- ${randomUUID()}\nreturn {ARGV[1]}`);
      expect(await runScript(watched, 1000, lua, [], ['one'])).toEqual(['one']);
      expect(await runScript(watched, 1000, lua, [], ['two'])).toEqual(['two']);
      expect(sent).toEqual(['EVAL', 'EVALSHA']);
      expect(errors).toEqual([]);

      // Redis lost its scripts (a restart, or SCRIPT FLUSH): the next run names it, hears NOSCRIPT once, sends it again.
      await redis.call('SCRIPT', 'FLUSH');
      expect(await runScript(watched, 1000, lua, [], ['three'])).toEqual(['three']);
      expect(sent).toEqual(['EVAL', 'EVALSHA', 'EVALSHA', 'EVAL']);
      expect(errors).toHaveLength(1);
      expect(errors[0]).toMatch(/NOSCRIPT/);
    } finally {
      await redis.quit();
    }
  });
});
