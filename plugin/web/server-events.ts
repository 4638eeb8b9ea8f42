/**
 * The `data:` events of a server-sent event stream (the chat route's streamed reply), as text, in order. Events
 * are separated by a blank line; an event's `data:` lines are joined with newlines; other fields and comments are
 * skipped. A chunk may end anywhere, even inside a character.
 */
export async function* serverEventData(body: ReadableStream<Uint8Array>): AsyncGenerator<string> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buffered = '';
  try {
    for (;;) {
      const { value, done } = await reader.read();
      buffered = (buffered + decoder.decode(value, { stream: !done })).replace(/\r\n?/g, '\n');
      let end = buffered.indexOf('\n\n');
      while (end >= 0) {
        const data = dataOf(buffered.slice(0, end));
        buffered = buffered.slice(end + 2);
        if (data !== undefined) {
          yield data;
        }
        end = buffered.indexOf('\n\n');
      }
      if (done) {
        const data = dataOf(buffered);
        if (data !== undefined) {
          yield data;
        }
        return;
      }
    }
  } finally {
    reader.releaseLock();
  }
}

function dataOf(event: string): string | undefined {
  const lines = event
    .split('\n')
    .filter((line) => line === 'data' || line.startsWith('data:'))
    .map((line) => line.slice(5).replace(/^ /, ''));
  return lines.length > 0 ? lines.join('\n') : undefined;
}
