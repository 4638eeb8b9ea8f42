/** Stores for a test file's tests (in memory unless a path is given), each closed after the test that opened it. */
import { afterEach } from '@jest/globals';
import { SqliteRepository, type SqliteRepositoryOptions } from '../../plugin/hosts/standalone/store/sqlite-repository.ts';

/** Registers the closing and returns the opener: `const openRepository = memoryRepositories();` at the file's top. */
export function memoryRepositories(): (path?: string, options?: SqliteRepositoryOptions) => SqliteRepository {
  const opened: SqliteRepository[] = [];
  afterEach(() => {
    for (const repository of opened.splice(0)) {
      repository.close();
    }
  });
  return (path = ':memory:', options = {}) => {
    const repository = SqliteRepository.open(path, options);
    opened.push(repository);
    return repository;
  };
}
