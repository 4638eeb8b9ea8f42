/**
 * Preloaded (`node --import ./bench/profile/profile-on-signal.ts`) into the contenders that scenario 14 profiles: the
 * SDK relay, the floor and fhirgate's host. It does nothing until the bench sends SIGUSR2: the first starts V8's
 * sampling profiler in this process (the inspector's Profiler domain, in-process: no port is opened), the second
 * stops it and writes the profile to `profileFile(pid)` (written whole, then renamed, so a reader never sees half).
 * The window is exactly the load the bench sent between the two signals, so start-up and other scenarios stay out.
 */
import { writeFileSync, renameSync } from 'node:fs';
import { Session } from 'node:inspector/promises';
import { profileFile, SAMPLING_INTERVAL_US } from './profile-file.ts';
import { toggleOnSignal } from './signal-toggle.ts';

let session: Session | undefined;

toggleOnSignal(
  async () => {
    session = new Session();
    session.connect();
    await session.post('Profiler.enable');
    await session.post('Profiler.setSamplingInterval', { interval: SAMPLING_INTERVAL_US });
    await session.post('Profiler.start');
    writeFileSync(`${profileFile(process.pid)}.started`, '');
  },
  async () => {
    const { profile } = await (session as Session).post('Profiler.stop');
    session?.disconnect();
    session = undefined;
    const file = profileFile(process.pid);
    writeFileSync(`${file}.partial`, JSON.stringify(profile));
    renameSync(`${file}.partial`, file);
  }
);
