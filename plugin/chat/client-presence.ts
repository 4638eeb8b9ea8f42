/**
 * Whether the client is still there to receive the end of its answer. A client that leaves shows up as an event
 * on its connection (its FIN or RST, read by the event loop), and a busy host reads it late: it may still be
 * writing a reply whose client left a while ago. Before a turn is recorded `completed`, what was written is
 * handed to the operating system and the event loop polls once more, so a departure the kernel already knows
 * about is seen, and the turn is recorded as it ended for the client.
 */
import type { Response } from 'express';

/** True when the client is still connected once everything written so far has left the process. */
export async function clientStillConnected(response: Response): Promise<boolean> {
  if (isGone(response)) {
    return false;
  }
  await flushed(response);
  // setImmediate runs after the poll phase: two of them make sure one poll ran after the last write went out.
  await nextLoopTurn();
  await nextLoopTurn();
  return !isGone(response);
}

function isGone(response: Response): boolean {
  const socket = response.socket;
  return response.destroyed || !socket || socket.destroyed || !socket.writable;
}

/**
 * Resolves once the response's buffered writes are with the operating system, or the connection is gone. Node
 * emits `drain` only after a write that went over the buffer's mark, so the buffer is watched instead: it empties
 * within a turn of the loop unless the client reads slowly, and then the end waits for it, as the stream did.
 */
async function flushed(response: Response): Promise<void> {
  for (let turns = 0; !isGone(response) && (response.writableLength > 0 || (response.socket?.writableLength ?? 0) > 0); turns++) {
    await (turns < 3 ? nextLoopTurn() : new Promise((resolve) => setTimeout(resolve, 10)));
  }
}

function nextLoopTurn(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}
