/**
 * Where the app is and where its server is. The built script sits in `<app>/assets/`, and the app in
 * `<server>/fhirgate/app/`: from the script's own URL both follow, whatever prefix the server mounts fhirgate at.
 * In the development server (no `assets/` folder) the page's own address is the app's.
 */
export interface AppLocation {
  /** The server's base URL, with a trailing slash: MedplumClient's `baseUrl`. */
  readonly serverUrl: string;
  /** The app's path, with a trailing slash: the router's basename. */
  readonly appPath: string;
}

export function appLocation(pageUrl: string, scriptUrl: string): AppLocation {
  const app = scriptUrl.includes('/assets/') ? new URL('../', scriptUrl) : new URL('./', pageUrl);
  return { serverUrl: new URL('../../', app).href, appPath: app.pathname };
}
