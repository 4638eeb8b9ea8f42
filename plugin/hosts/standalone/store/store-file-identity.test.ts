import { mkdtempSync, renameSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Patient } from '@medplum/fhirtypes';
import { AppError } from '../../../errors.ts';
import { SqliteRepository } from './sqlite-repository.ts';

let directory: string;
let store: SqliteRepository;

beforeEach(() => {
  directory = mkdtempSync(join(tmpdir(), 'fhirgate-store-file-'));
  store = SqliteRepository.open(join(directory, 'fhirgate.sqlite'));
});

afterEach(() => {
  store.close();
  rmSync(directory, { recursive: true, force: true });
});

const patient: Patient = { resourceType: 'Patient', name: [{ family: 'Kept' }] };

describe('a store whose file is deleted while it runs', () => {
  test('acknowledges no write from then on: each is refused with unavailable (503), reads too', async () => {
    const before = await store.createResource(patient);

    rmSync(directory, { recursive: true, force: true });

    const refused = await store.createResource(patient).catch((error: unknown) => error);
    expect(AppError.isInstance(refused)).toBe(true);
    expect(refused).toMatchObject({ code: 'unavailable', status: 503, message: expect.stringMatching(/file was deleted while the server ran/) });
    await expect(store.readResource('Patient', before.id)).rejects.toMatchObject({ code: 'unavailable' });
    expect(() => store.checkStorage()).toThrow(/file was deleted/);
  });

  test('the health check finds it before any write does, and from then on every operation is refused', async () => {
    const before = await store.createResource(patient);
    expect(() => store.checkStorage()).not.toThrow();

    rmSync(join(directory, 'fhirgate.sqlite'));

    expect(() => store.checkStorage()).toThrow(expect.objectContaining({ code: 'unavailable' }));
    await expect(store.readResource('Patient', before.id)).rejects.toMatchObject({ code: 'unavailable' });
    await expect(store.createResource(patient)).rejects.toMatchObject({ code: 'unavailable' });
  });

  test('a file replaced under its name (moved away, another put there) is not the store either', async () => {
    await store.createResource(patient);
    renameSync(join(directory, 'fhirgate.sqlite'), join(directory, 'moved.sqlite'));
    const other = SqliteRepository.open(join(directory, 'fhirgate.sqlite'));
    try {
      await expect(store.createResource(patient)).rejects.toMatchObject({ code: 'unavailable', message: expect.stringMatching(/was replaced/) });
    } finally {
      other.close();
    }
  });
});
