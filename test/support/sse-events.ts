/** The events of an SSE body: each `data:` line's JSON, with its `event:` name where it has one; `[DONE]` left out. */
export function sseEvents<T = unknown>(text: string): { name?: string; data: T }[] {
  return text
    .split('\n\n')
    .filter((block) => block.trim() !== '')
    .map((block) => {
      const lines = block.split('\n');
      const name = lines.find((line) => line.startsWith('event: '))?.slice('event: '.length);
      const data = lines.find((line) => line.startsWith('data: '))?.slice('data: '.length) ?? '';
      return { name, data };
    })
    .filter((event) => event.data !== '[DONE]')
    .map((event) => ({ ...(event.name ? { name: event.name } : {}), data: JSON.parse(event.data) as T }));
}
