// Medplum 5.1's packages/server/src/logger.ts, as far as the mount uses it.
import type { Logger } from '@medplum/core';

export declare const globalLogger: Logger;
