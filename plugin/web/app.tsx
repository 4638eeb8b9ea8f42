/**
 * The app's pages: sign-in, and for a signed-in user the chat and the review console under the app's header.
 * Anyone not signed in (or whose session has ended) is sent to sign in, and comes back to the page they asked for.
 */
import { useMedplumContext } from '@medplum/react';
import type { JSX } from 'react';
import { Navigate, Outlet, Route, Routes, useLocation } from 'react-router';
import { AppHeader } from './app-header.tsx';
import { ChatPage } from './pages/chat-page.tsx';
import { RecordPage } from './pages/record-page.tsx';
import { ReviewPage } from './pages/review/review-page.tsx';
import { SignInPage } from './pages/sign-in-page.tsx';
import { signInPathFor } from './sign-in-return.ts';

export function App(): JSX.Element {
  // While a stored session is being restored there is no profile yet: wait rather than send the user to sign in.
  const { profile, loading } = useMedplumContext();
  if (loading) {
    return <main aria-busy="true" />;
  }
  return (
    <Routes>
      <Route
        path="/signin"
        element={
          <main>
            <SignInPage />
          </main>
        }
      />
      <Route element={<SignedInLayout />}>
        <Route path="/chat" element={<ChatPage />} />
        <Route path="/records/:resourceType/:id" element={<RecordPage />} />
        <Route path="/review/*" element={<ReviewPage />} />
      </Route>
      <Route path="*" element={<Navigate to={profile ? '/chat' : '/signin'} replace />} />
    </Routes>
  );
}

/** The header and the page, for a signed-in user; otherwise sign-in, returning here afterwards. */
function SignedInLayout(): JSX.Element {
  const { profile } = useMedplumContext();
  const location = useLocation();
  if (!profile) {
    return <Navigate to={signInPathFor(location.pathname + location.search)} replace />;
  }
  return (
    <>
      <AppHeader />
      <main>
        <Outlet />
      </main>
    </>
  );
}
