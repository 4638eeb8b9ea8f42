import { AppError } from '../../plugin/errors.ts';

/** Runs `action` and returns the AppError it throws; fails when it throws nothing or something else. */
export function appErrorOf(action: () => unknown): AppError {
  try {
    action();
  } catch (error) {
    if (AppError.isInstance(error)) {
      return error;
    }
    throw error;
  }
  throw new Error('expected an AppError');
}
