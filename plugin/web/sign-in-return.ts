/**
 * Where sign-in returns to: the page the user asked for, carried as `?next=` on the sign-in page's address (so it
 * survives a reload), and only ever a path of the app itself.
 */

/** The sign-in page's address that returns to `path` (the app-relative path with its query) afterwards. */
export function signInPathFor(path: string): string {
  return path && path !== '/' && !path.startsWith('/signin') ? `/signin?next=${encodeURIComponent(path)}` : '/signin';
}

/** The app-relative path `next` names, or the chat when it names none or anything outside the app. */
export function returnPathOf(next: string | null): string {
  // `//host` and `/\host` would leave the app; so would anything not starting at its root.
  return next && next.startsWith('/') && !next.startsWith('//') && !next.startsWith('/\\') && !next.startsWith('/signin') ? next : '/chat';
}
