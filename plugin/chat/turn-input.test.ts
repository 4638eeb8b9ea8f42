import type { ChatMessage } from '../llm/chat-model.ts';
import { parseChatRequest } from './chat-request.ts';
import { askedIn, openingInstructions, turnInputOf } from './turn-input.ts';

const fewShot = parseChatRequest({
  messages: [
    { role: 'system', content: 'Answer with one word.' },
    { role: 'user', content: 'Capital of France?' },
    { role: 'assistant', content: 'Paris' },
    { role: 'user', name: 'dr_lee', content: [{ type: 'text', text: 'Capital of ' }, { type: 'text', text: 'Italy?' }] },
    { role: 'developer', content: 'Mind the spelling.' },
  ],
});

describe('what a turn adds to its conversation', () => {
  test('a request that repeats nothing adds every message it sent: instructions, few-shot pairs, names and parts', () => {
    expect(turnInputOf(fewShot, false)).toEqual(fewShot.messages);
  });

  test('a request that sends an exchange on record again adds its opening instructions and what follows its last assistant message', () => {
    expect(turnInputOf(fewShot, true)).toEqual([
      { role: 'system', content: 'Answer with one word.' },
      { role: 'user', content: 'Capital of Italy?', parts: ['Capital of ', 'Italy?'], name: 'dr_lee' },
      { role: 'developer', content: 'Mind the spelling.' },
    ]);
  });

  test("the Responses API's instructions are not the turn's input", () => {
    const messages: ChatMessage[] = [
      { role: 'system', content: 'instructions field' },
      { role: 'developer', content: 'an input item' },
      { role: 'user', content: 'Hi' },
    ];
    expect(turnInputOf({ messages, instructionCount: 1 }, false)).toEqual(messages.slice(1));
    expect(openingInstructions(turnInputOf({ messages, instructionCount: 1 }, false))).toEqual([{ role: 'developer', content: 'an input item' }]);
  });

  test('what a turn asks is its input without its opening instructions', () => {
    expect(askedIn(turnInputOf(fewShot, true)).map((message) => message.role)).toEqual(['user', 'developer']);
  });
});
