/**
 * Sign-in: the Medplum server's own login (`SignInForm`: email and password, then the project when the user has
 * several), as Medplum's app; afterwards the page the user asked for (`?next=`), or the chat.
 */
import { Stack, Title } from '@mantine/core';
import { Document, SignInForm } from '@medplum/react';
import { useEffect, useRef, type JSX } from 'react';
import { useNavigate, useSearchParams } from 'react-router';
import { returnPathOf } from '../sign-in-return.ts';
import './sign-in-contrast.css';

export function SignInPage(): JSX.Element {
  const navigate = useNavigate();
  const [search] = useSearchParams();
  const form = useRef<HTMLDivElement>(null);
  useNamedProjectList(form);
  return (
    <Document width={450}>
      <div ref={form}>
        <SignInForm disableGoogleAuth onSuccess={() => navigate(returnPathOf(search.get('next')), { replace: true })}>
          <Stack align="center">
            <Title order={1}>Sign in to fhirgate</Title>
          </Stack>
        </SignInForm>
      </div>
    </Document>
  );
}

/**
 * The project chooser of `@medplum/react` (a user with several memberships) draws its list without a name and
 * without the form's title: screen readers would meet an unnamed list on a page without a main heading. The list is
 * named here, and the chooser's title is the page's main heading while it shows.
 */
function useNamedProjectList(container: React.RefObject<HTMLDivElement | null>): void {
  useEffect(() => {
    const root = container.current;
    if (!root) {
      return undefined;
    }
    const name = (): void => {
      for (const list of root.querySelectorAll('[role="listbox"]:not([aria-label])')) {
        list.setAttribute('aria-label', 'Your projects');
      }
      // The chooser's own title (an h3): the page's main heading while it shows.
      if (!root.querySelector('h1, [aria-level="1"]')) {
        root.querySelector('h2, h3')?.setAttribute('aria-level', '1');
      }
    };
    name();
    const observer = new MutationObserver(name);
    observer.observe(root, { childList: true, subtree: true });
    return () => observer.disconnect();
  }, [container]);
}
