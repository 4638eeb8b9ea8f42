import type { ChatMessage } from '../llm/chat-model.ts';
import { repeatedExchangeOf, replyDigest, threadDigest, type ThreadScope } from './thread-digest.ts';

const alice: ThreadScope = ['project-1', 'Practitioner/alice'];
const bob: ThreadScope = ['project-1', 'Practitioner/bob'];
const call = { id: 'call_1', name: 'get_weather', arguments: '{"city":"Lyon","unit":"C"}' };

describe('the digest of an exchange', () => {
  test("a request that sends a reply back as its client got it repeats that reply's exchange", () => {
    const request: ChatMessage[] = [{ role: 'user', content: 'Weather in Lyon?' }];
    const digest = replyDigest(alice, request, { text: '', toolCalls: [call] });
    const next: ChatMessage[] = [...request, { role: 'assistant', content: '', toolCalls: [call] }, { role: 'tool', toolCallId: 'call_1', content: 'Sunny' }];

    expect(repeatedExchangeOf(alice, next)).toEqual({ digest, messageCount: 2 });
  });

  test('instructions do not count, and re-serialised arguments are the same call', () => {
    const sent: ChatMessage[] = [{ role: 'system', content: 'It is Monday.' }, { role: 'user', content: 'Weather?' }, { role: 'assistant', content: '', toolCalls: [call] }];
    const again: ChatMessage[] = [
      { role: 'developer', content: 'It is Tuesday.' },
      { role: 'user', content: 'Weather?' },
      { role: 'assistant', content: '', toolCalls: [{ ...call, arguments: '{ "unit": "C", "city": "Lyon" }' }] },
    ];
    expect(threadDigest(alice, again)).toBe(threadDigest(alice, sent));
    expect(repeatedExchangeOf(alice, again)?.messageCount).toBe(2);
  });

  test('another caller, another text, another call or another order is another exchange', () => {
    const exchange: ChatMessage[] = [{ role: 'user', content: 'Remember 7.' }, { role: 'assistant', content: 'Echo: Remember 7.' }];
    const digest = threadDigest(alice, exchange);

    expect(threadDigest(bob, exchange)).not.toBe(digest);
    expect(threadDigest(alice, [exchange[0], { role: 'assistant', content: 'Echo: Remember 9.' }])).not.toBe(digest);
    expect(threadDigest(alice, [exchange[1], exchange[0]])).not.toBe(digest);
    expect(threadDigest(alice, [exchange[0], { role: 'assistant', content: 'Echo: Remember 7.', toolCalls: [call] }])).not.toBe(digest);
    // The text is not readable from the digest.
    expect(digest).not.toContain('Remember');
  });

  test('a request with no assistant message repeats nothing', () => {
    expect(repeatedExchangeOf(alice, [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'Hello' }])).toBeUndefined();
  });
});
