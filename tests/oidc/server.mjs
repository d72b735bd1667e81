// A real OpenID Connect provider for TiHub's OAuth login tests (tests/browser/test_oidc.py), on the
// certified oidc-provider package: discovery, authorization code flow with PKCE, tokens, userinfo.
// Only the login page is ours: a username/password form checked against the accounts given below.
//
//   node server.mjs   with OIDC_PORT, OIDC_CLIENT_ID, OIDC_CLIENT_SECRET, OIDC_REDIRECT_URI and
//                     OIDC_ACCOUNTS='{"ann": {"password": "...", "email": "ann@example.org"}, ...}'
//
// Prints "oidc-provider listening on <issuer>" once it answers. Test-only: an in-memory store and a
// signing key made at start, so nothing outlives the process.
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import http from 'node:http';

import Provider from 'oidc-provider';

const env = (name) => {
  if (!process.env[name]) throw new Error(`${name} is not set`);
  return process.env[name];
};
const port = Number(env('OIDC_PORT'));
const issuer = `http://127.0.0.1:${port}`;
const accounts = JSON.parse(env('OIDC_ACCOUNTS'));
const clientId = env('OIDC_CLIENT_ID');

const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
const jwk = { ...privateKey.export({ format: 'jwk' }), kid: 'test-key', use: 'sig', alg: 'RS256' };

const provider = new Provider(issuer, {
  clients: [{
    client_id: clientId,
    client_secret: env('OIDC_CLIENT_SECRET'),
    redirect_uris: [env('OIDC_REDIRECT_URI')],
    // OAuthenticator sends the client's id and secret in the token request's body by default
    token_endpoint_auth_method: 'client_secret_post',
  }],
  jwks: { keys: [jwk] },
  cookies: { keys: [randomBytes(32).toString('hex')] },
  claims: { openid: ['sub'], profile: ['preferred_username', 'name'], email: ['email', 'email_verified'] },
  features: { devInteractions: { enabled: false } },
  async findAccount(_ctx, sub) {
    const account = accounts[sub];
    if (!account) return undefined;
    return {
      accountId: sub,
      async claims() {
        return { sub, preferred_username: sub, name: sub, email: account.email, email_verified: true };
      },
    };
  },
  // TiHub is a first-party client: grant the scopes it asks for without a consent page
  async loadExistingGrant(ctx) {
    const grantId = ctx.oidc.result?.consent?.grantId || ctx.oidc.session.grantIdFor(ctx.oidc.client.clientId);
    if (grantId) return ctx.oidc.provider.Grant.find(grantId);
    const grant = new ctx.oidc.provider.Grant({
      clientId: ctx.oidc.client.clientId, accountId: ctx.oidc.session.accountId,
    });
    grant.addOIDCScope('openid profile email');
    await grant.save();
    return grant;
  },
});

const escape = (s) => String(s).replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

function loginPage(uid, error = '') {
  return `<!doctype html><html><head><title>Test identity provider</title></head><body>
<h1>Test identity provider: sign in</h1>
${error ? `<p id="error">${escape(error)}</p>` : ''}
<form method="post" action="/interaction/${escape(uid)}/login">
  <label>Username <input name="login" autocomplete="username" autofocus></label>
  <label>Password <input name="password" type="password" autocomplete="current-password"></label>
  <button type="submit">Sign in</button>
</form></body></html>`;
}

async function readForm(req) {
  let body = '';
  for await (const chunk of req) body += chunk;
  return new URLSearchParams(body);
}

function send(res, status, html) {
  res.writeHead(status, { 'Content-Type': 'text/html; charset=utf-8' });
  res.end(html);
}

const callback = provider.callback();
const server = http.createServer(async (req, res) => {
  const m = req.url.match(/^\/interaction\/([^/?]+)(\/login)?/);
  if (!m) return callback(req, res);
  try {
    const details = await provider.interactionDetails(req, res);
    if (details.uid !== m[1]) return send(res, 400, 'interaction mismatch');
    if (details.prompt.name !== 'login') {
      // consent is granted by loadExistingGrant; any other prompt is not part of these tests
      return send(res, 400, `unexpected prompt ${escape(details.prompt.name)}`);
    }
    if (req.method === 'GET') return send(res, 200, loginPage(details.uid));
    const form = await readForm(req);
    const login = form.get('login') || '';
    const account = accounts[login];
    if (!account || account.password !== form.get('password')) {
      return send(res, 200, loginPage(details.uid, 'Wrong username or password.'));
    }
    return await provider.interactionFinished(req, res, { login: { accountId: login } },
                                              { mergeWithLastSubmission: false });
  } catch (err) {
    console.error(err);
    return send(res, 500, escape(err.message));
  }
});

server.listen(port, '127.0.0.1', () => console.log(`oidc-provider listening on ${issuer}`));
for (const signal of ['SIGTERM', 'SIGINT']) process.on(signal, () => server.close(() => process.exit(0)));
