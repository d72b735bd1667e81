// The one way the panels talk to TiHub: every call goes to this extension's server routes
// (ti/api/...), which forward to the ti service with the workspace's hub token.

import { URLExt } from '@jupyterlab/coreutils';
import { ServerConnection } from '@jupyterlab/services';

/** An error the user can read: the API's own sentence, and the field it names (if any). */
export class TiError extends Error {
  constructor(
    message: string,
    readonly status: number,
    readonly field: string | null = null
  ) {
    super(message);
  }
}

export async function requestAPI<T>(
  endpoint: string,
  init: RequestInit & { json?: unknown } = {}
): Promise<T> {
  const settings = ServerConnection.makeSettings();
  const url = URLExt.join(settings.baseUrl, 'ti', 'api', endpoint);
  const { json, ...rest } = init;
  // without an explicit cache mode, ServerConnection appends a bare timestamp to the query string
  rest.cache = rest.cache || 'no-store';
  if (json !== undefined) {
    rest.body = JSON.stringify(json);
    rest.headers = { 'Content-Type': 'application/json', ...(rest.headers || {}) };
  }
  let response: Response;
  try {
    response = await ServerConnection.makeRequest(url, rest, settings);
  } catch (err) {
    throw new TiError(`cannot reach the workspace server: ${(err as Error).message}`, 0);
  }
  const text = await response.text();
  let data: any = null;
  if (text) {
    try {
      data = JSON.parse(text);
    } catch {
      data = null;
    }
  }
  if (!response.ok) {
    const detail =
      (data && (data.detail || data.message)) ||
      `${response.status} ${response.statusText || 'error'} from ${endpoint}`;
    throw new TiError(String(detail), response.status, (data && data.field) || null);
  }
  return data as T;
}

/** Query string from an object, skipping empty values. */
export function qs(args: Record<string, string | number | undefined | null>): string {
  const parts = Object.entries(args)
    .filter(([, v]) => v !== undefined && v !== null && v !== '')
    .map(([k, v]) => `${encodeURIComponent(k)}=${encodeURIComponent(String(v))}`);
  return parts.length ? `?${parts.join('&')}` : '';
}
