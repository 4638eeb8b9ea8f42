/** The app's pages: sign-in, and the chat for a signed-in user (anyone else is sent to sign in). */
import { useMedplumContext } from '@medplum/react';
import type { JSX } from 'react';
import { Navigate, Route, Routes } from 'react-router';
import { ChatPage } from './pages/chat-page.tsx';
import { RecordPage } from './pages/record-page.tsx';
import { ReviewPage } from './pages/review/review-page.tsx';
import { SignInPage } from './pages/sign-in-page.tsx';

export function App(): JSX.Element {
  // While a stored session is being restored there is no profile yet: wait rather than send the user to sign in.
  const { profile, loading } = useMedplumContext();
  if (loading) {
    return <main aria-busy="true" />;
  }
  return (
    <main>
      <Routes>
        <Route path="/signin" element={<SignInPage />} />
        <Route path="/chat" element={profile ? <ChatPage /> : <Navigate to="/signin" replace />} />
        <Route path="/records/:resourceType/:id" element={profile ? <RecordPage /> : <Navigate to="/signin" replace />} />
        <Route path="/review/*" element={profile ? <ReviewPage /> : <Navigate to="/signin" replace />} />
        <Route path="*" element={<Navigate to={profile ? '/chat' : '/signin'} replace />} />
      </Routes>
    </main>
  );
}
