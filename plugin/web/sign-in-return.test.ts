import { returnPathOf, signInPathFor } from './sign-in-return.ts';

describe('sign-in returns to the page asked for', () => {
  test('a page of the app is carried through sign-in', () => {
    const path = '/review/conversations/3f2a?tab=disclosures';
    const signIn = signInPathFor(path);
    expect(signIn).toBe('/signin?next=%2Freview%2Fconversations%2F3f2a%3Ftab%3Ddisclosures');
    expect(returnPathOf(new URLSearchParams(signIn.split('?')[1]).get('next'))).toBe(path);
  });

  test('without a page, or from the sign-in page itself, sign-in goes to the chat', () => {
    expect(signInPathFor('/')).toBe('/signin');
    expect(signInPathFor('/signin?next=%2Freview')).toBe('/signin');
    expect(returnPathOf(null)).toBe('/chat');
    expect(returnPathOf('/signin')).toBe('/chat');
  });

  test('nothing outside the app is a place to return to', () => {
    for (const next of ['https://evil.example/', '//evil.example/x', '/\\evil.example', 'javascript:alert(1)', 'review']) {
      expect(returnPathOf(next)).toBe('/chat');
    }
  });
});
