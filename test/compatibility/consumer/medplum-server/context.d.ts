// Medplum 5.1's packages/server/src/context.ts, as far as the mount uses it.
import type { Logger } from '@medplum/core';
import type { NextFunction, Request, Response } from 'express';

export interface IRequestContext {
  readonly requestId: string;
  readonly traceId: string;
  readonly logger: Logger;
}

export declare function tryGetRequestContext(): IRequestContext | undefined;

export declare function attachRequestContext(req: Request, res: Response, next: NextFunction): Promise<void>;
