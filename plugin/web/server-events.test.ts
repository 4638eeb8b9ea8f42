import { serverEventData } from './server-events.ts';

function streamOf(chunks: readonly string[]): ReadableStream<Uint8Array> {
  const encoder = new TextEncoder();
  const bytes = chunks.map((chunk) => encoder.encode(chunk));
  return new ReadableStream({
    start(controller) {
      bytes.forEach((chunk) => controller.enqueue(chunk));
      controller.close();
    },
  });
}

async function collect(chunks: readonly string[]): Promise<string[]> {
  const events: string[] = [];
  for await (const data of serverEventData(streamOf(chunks))) {
    events.push(data);
  }
  return events;
}

describe('serverEventData', () => {
  it('yields each event’s data in order, whatever the chunks', async () => {
    const stream = 'data: {"a":1}\n\n: comment\n\ndata: {"b":2}\r\n\r\ndata: [DONE]\n\n';
    const expected = ['{"a":1}', '{"b":2}', '[DONE]'];
    expect(await collect([stream])).toEqual(expected);
    expect(await collect(stream.split(''))).toEqual(expected);
  });

  it('joins the data lines of one event and keeps a character split between chunks', async () => {
    const bytes = new TextEncoder().encode('data: Grüße\ndata: zwei\n\n');
    const split = new ReadableStream<Uint8Array>({
      start(controller) {
        controller.enqueue(bytes.slice(0, 10));
        controller.enqueue(bytes.slice(10));
        controller.close();
      },
    });
    const events: string[] = [];
    for await (const data of serverEventData(split)) {
      events.push(data);
    }
    expect(events).toEqual(['Grüße\nzwei']);
  });

  it('yields a last event the stream ends without a blank line after', async () => {
    expect(await collect(['event: x\ndata: last'])).toEqual(['last']);
  });
});
