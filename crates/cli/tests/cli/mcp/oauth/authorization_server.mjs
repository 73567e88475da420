// A real OAuth 2.1 authorization server for tests: the npm package
// oidc-provider (pinned in ../js/package.json), on plain http on loopback.
//
//   node authorization_server.mjs [PORT]        (or OAUTH_PORT=PORT; 0 or none: a free port)
//
// Prints one JSON line to stdout once it listens, then serves until killed:
//
//   {"issuer":"http://127.0.0.1:PORT"}
//
// What it offers (see README.md beside this file for the whole story):
// - discovery at /.well-known/openid-configuration and, as an alias with the
//   same document, /.well-known/oauth-authorization-server (RFC 8414);
// - open dynamic client registration (RFC 7591) at /reg, unless
//   OAUTH_REGISTRATION=off;
// - with OAUTH_APP_CLIENT_ID, a client registered beforehand: a native app
//   with a secret (client_secret_basic), its one redirect URI
//   OAUTH_APP_REDIRECT_URI, the code and refresh_token grants;
// - authorization code with PKCE (S256 only, required for every client);
// - RFC 8707 resource indicators: any http(s) loopback URL is a resource
//   server with scope `mcp`, opaque access tokens whose audience is that URL;
// - refresh tokens for every client registered with the refresh_token grant
//   (no `offline_access` nor `prompt=consent` needed; `offline_access` is
//   still advertised, and kept in the grant only with prompt=consent, as
//   oidc-provider does), rotated on every use (public clients);
// - token introspection (RFC 7662) at /token/introspection for the static
//   confidential client OAUTH_RS_CLIENT_ID / OAUTH_RS_CLIENT_SECRET;
// - token revocation (RFC 7009) at /token/revocation; revoking a refresh or
//   access token revokes its whole grant;
// - a login form and a consent form of its own under /interaction/UID
//   (user OAUTH_TEST_USER, password OAUTH_TEST_PASSWORD);
// - test-only endpoints: GET /test/log (what clients sent, no secrets) and
//   POST /test/revoke (revoke grants without knowing any token).
//
// Environment:
//   OAUTH_PORT                 port when none is given as argv[2] (default 0)
//   OAUTH_ACCESS_TOKEN_TTL     access token lifetime in seconds (default 3600)
//   OAUTH_REFRESH_TOKEN_TTL    refresh token lifetime in seconds (default 86400)
//   OAUTH_RS_CLIENT_ID         introspection client id (default switchboard-test-rs)
//   OAUTH_RS_CLIENT_SECRET     its secret (default switchboard-test-rs-secret)
//   OAUTH_TEST_USER            the one user that can sign in (default alice)
//   OAUTH_TEST_PASSWORD        its password (default wonderland)
//   OAUTH_DEFAULT_RESOURCE     resource assumed when a request names none
//                              (default: none, the token is then not for any MCP server)
//   OAUTH_REGISTRATION=off     no dynamic client registration (not in the metadata either)
//   OAUTH_APP_CLIENT_ID        a pre-registered client's id (default: none)
//   OAUTH_APP_CLIENT_SECRET    its secret (required with the id)
//   OAUTH_APP_REDIRECT_URI     its redirect URI (required with the id)
//   OAUTH_QUIET=1              do not log requests to stderr

import { createPrivateKey, generateKeyPairSync, randomBytes } from 'node:crypto';
import { createServer } from 'node:http';
import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';

// oidc-provider lives in ../js/node_modules (installed from ../js/package-lock.json).
const requireFromJs = createRequire(new URL('../js/package.json', import.meta.url));
const { default: Provider, errors } = await import(
  pathToFileURL(requireFromJs.resolve('oidc-provider')).href
);

const env = process.env;
const seconds = (name, fallback) => {
  const value = env[name] === undefined || env[name] === '' ? fallback : Number(env[name]);
  if (!Number.isInteger(value) || value <= 0) {
    throw new Error(`${name} must be a positive whole number of seconds, not ${env[name]}`);
  }
  return value;
};
const ACCESS_TOKEN_TTL = seconds('OAUTH_ACCESS_TOKEN_TTL', 3600);
const REFRESH_TOKEN_TTL = seconds('OAUTH_REFRESH_TOKEN_TTL', 86400);
const RS_CLIENT_ID = env.OAUTH_RS_CLIENT_ID || 'switchboard-test-rs';
const RS_CLIENT_SECRET = env.OAUTH_RS_CLIENT_SECRET || 'switchboard-test-rs-secret';
const TEST_USER = env.OAUTH_TEST_USER || 'alice';
const TEST_PASSWORD = env.OAUTH_TEST_PASSWORD || 'wonderland';
const DEFAULT_RESOURCE = env.OAUTH_DEFAULT_RESOURCE || undefined;
const RESOURCE_SCOPE = 'mcp';
const QUIET = env.OAUTH_QUIET === '1';
const REGISTRATION = env.OAUTH_REGISTRATION !== 'off';
const APP_CLIENT = env.OAUTH_APP_CLIENT_ID
  ? {
      client_id: env.OAUTH_APP_CLIENT_ID,
      client_secret: env.OAUTH_APP_CLIENT_SECRET,
      client_name: 'pre-registered app',
      application_type: 'native',
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      redirect_uris: [env.OAUTH_APP_REDIRECT_URI],
      token_endpoint_auth_method: 'client_secret_basic',
    }
  : undefined;
if (APP_CLIENT && !(APP_CLIENT.client_secret && APP_CLIENT.redirect_uris[0])) {
  throw new Error('OAUTH_APP_CLIENT_ID needs OAUTH_APP_CLIENT_SECRET and OAUTH_APP_REDIRECT_URI');
}

const log = (...parts) => {
  if (!QUIET) process.stderr.write(`[authorization-server] ${parts.join(' ')}\n`);
};

const requestedPort = Number(process.argv[2] ?? env.OAUTH_PORT ?? 0);
if (!Number.isInteger(requestedPort) || requestedPort < 0 || requestedPort > 65535) {
  throw new Error(`bad port ${process.argv[2] ?? env.OAUTH_PORT}`);
}

// Listen first, so that with port 0 the issuer can name the port we got.
let handler = (_req, res) => {
  res.statusCode = 503;
  res.end();
};
const server = createServer((req, res) => handler(req, res));
await new Promise((resolve, reject) => {
  server.once('error', reject);
  server.listen(requestedPort, '127.0.0.1', resolve);
});
const { port } = server.address();
const issuer = `http://127.0.0.1:${port}`;

const isLoopbackResource = (value) => {
  const url = URL.parse(value);
  return (
    url !== null
    && (url.protocol === 'http:' || url.protocol === 'https:')
    && ['127.0.0.1', 'localhost', '[::1]'].includes(url.hostname)
    && url.hash === ''
  );
};

// The signing key, generated as PEM and only then made a key object to
// export as a JWK. Exporting the key object `generateKeyPairSync` returns
// can deadlock Node 20: the export holds the key's lock while it
// allocates, a garbage collection in that allocation runs the finished
// key-generation job's destructor, and that destructor takes the same
// lock (seen in CI: the server never printed its ready line). The key
// object made from the PEM shares no lock with the job.
const { privateKey: privatePem } = generateKeyPairSync('rsa', {
  modulusLength: 2048,
  publicKeyEncoding: { type: 'spki', format: 'pem' },
  privateKeyEncoding: { type: 'pkcs8', format: 'pem' },
});
const privateKey = createPrivateKey(privatePem);

const provider = new Provider(issuer, {
  clients: [
    {
      // The resource server's own credentials: it only introspects.
      client_id: RS_CLIENT_ID,
      client_secret: RS_CLIENT_SECRET,
      client_name: 'protected MCP server (introspection)',
      grant_types: [],
      response_types: [],
      redirect_uris: [],
      token_endpoint_auth_method: 'client_secret_basic',
    },
    ...(APP_CLIENT ? [APP_CLIENT] : []),
  ],
  jwks: { keys: [{ ...privateKey.export({ format: 'jwk' }), kid: 'test-rsa', alg: 'RS256', use: 'sig' }] },
  cookies: { keys: [randomBytes(32).toString('base64url')] },
  scopes: ['openid', 'offline_access', RESOURCE_SCOPE],
  claims: { openid: ['sub'] },
  findAccount: async (_ctx, sub) => ({
    accountId: sub,
    claims: async () => ({ sub }),
  }),
  pkce: { required: () => true },
  ttl: {
    AccessToken: ACCESS_TOKEN_TTL,
    RefreshToken: REFRESH_TOKEN_TTL,
    AuthorizationCode: 60,
    Grant: REFRESH_TOKEN_TTL,
    Session: 3600,
    Interaction: 600,
    IdToken: 3600,
  },
  // Refresh tokens for every code grant of a client allowed the refresh_token
  // grant, whether `offline_access` survived in the request or not
  // (oidc-provider drops it unless prompt=consent is asked for).
  issueRefreshToken: async (_ctx, client) => client.grantTypeAllowed('refresh_token'),
  // Tokens do not die with the browser session of the login.
  expiresWithSession: async () => false,
  features: {
    devInteractions: { enabled: false },
    registration: { enabled: REGISTRATION, initialAccessToken: false },
    introspection: {
      enabled: true,
      // The resource server may introspect any token; a client only its own.
      allowedPolicy: async (_ctx, client, token) =>
        client.clientId === RS_CLIENT_ID || token.clientId === client.clientId,
    },
    revocation: { enabled: true },
    resourceIndicators: {
      enabled: true,
      defaultResource: async (_ctx, _client, oneOf) => oneOf ?? DEFAULT_RESOURCE,
      // A refresh without `resource` keeps the audience of the grant.
      useGrantedResource: async () => true,
      getResourceServerInfo: async (_ctx, resourceIndicator) => {
        if (!isLoopbackResource(resourceIndicator)) {
          throw new errors.InvalidTarget(`${resourceIndicator} is not a loopback resource`);
        }
        return {
          scope: RESOURCE_SCOPE,
          audience: resourceIndicator,
          accessTokenTTL: ACCESS_TOKEN_TTL,
          accessTokenFormat: 'opaque',
        };
      },
    },
  },
  interactions: { url: (_ctx, interaction) => `/interaction/${interaction.uid}` },
  // Errors as JSON, without oidc-provider's HTML error page.
  renderError: async (ctx, out) => {
    ctx.type = 'json';
    ctx.body = out;
  },
});

// ---- what clients did, for tests to assert on (never secrets nor tokens) ----

const record = {
  registrations: [],
  authorizations: [],
  authorization_errors: [],
  registration_errors: [],
  token_requests: [],
  revocation_requests: 0,
};
const grants = new Map(); // grant id -> client id
const accessTokens = new Map(); // access token id -> grant id

provider.on('registration_create.success', (_ctx, client) => {
  const m = client.metadata();
  record.registrations.push({
    client_id: m.client_id,
    client_name: m.client_name,
    application_type: m.application_type,
    token_endpoint_auth_method: m.token_endpoint_auth_method,
    grant_types: m.grant_types,
    response_types: m.response_types,
    redirect_uris: m.redirect_uris,
    scope: m.scope,
  });
  log('registered client', m.client_id, JSON.stringify(m.redirect_uris));
});
// Authorization requests as sent (before oidc-provider drops `offline_access`
// without prompt=consent); outcomes of those refused.
function recordAuthorization(query) {
  const many = (name) => {
    const values = query.getAll(name);
    return values.length > 1 ? values : values[0];
  };
  record.authorizations.push({
    client_id: many('client_id'),
    response_type: many('response_type'),
    redirect_uri: many('redirect_uri'),
    scope: many('scope'),
    resource: many('resource'),
    prompt: many('prompt'),
    code_challenge_method: many('code_challenge_method'),
    has_code_challenge: query.has('code_challenge'),
    has_state: query.has('state'),
  });
}
provider.on('authorization.error', (ctx, err) => {
  record.authorization_errors.push({
    client_id: ctx.oidc?.params?.client_id,
    error: err.error ?? String(err),
    error_description: err.error_description,
  });
  log('authorization error', err.error ?? err);
});
const tokenRequest = (ctx, outcome) => {
  const p = ctx.oidc?.params ?? {};
  record.token_requests.push({
    grant_type: p.grant_type,
    client_id: ctx.oidc?.client?.clientId,
    resource: p.resource,
    scope: p.scope,
    outcome,
  });
  log('token request', p.grant_type, '->', outcome);
};
provider.on('grant.success', (ctx) => tokenRequest(ctx, 'ok'));
provider.on('grant.error', (ctx, err) => tokenRequest(ctx, err.error ?? String(err)));
provider.on('grant.saved', (grant) => grants.set(grant.jti, grant.clientId));
provider.on('grant.revoked', (_ctx, grantId) => grants.delete(grantId));
provider.on('access_token.saved', (token) => accessTokens.set(token.jti, token.grantId));
provider.on('registration_create.error', (_ctx, err) => {
  record.registration_errors.push({ error: err.error ?? String(err), error_description: err.error_description });
  log('registration error', err.error ?? err, err.error_description ?? '');
});
provider.on('server_error', (_ctx, err) => log('server error:', err?.stack ?? err));

// Revokes the live grants (of one client, or of all): with tokens 'access'
// only their access tokens (a refresh then still works), with 'all' the
// grants themselves and every token of theirs (a refresh then fails with
// invalid_grant, as after the user revoked the access).
async function revokeGrants({ clientId, tokens }) {
  let count = 0;
  for (const [grantId, owner] of grants) {
    if (clientId && owner !== clientId) continue;
    if (!(await provider.Grant.find(grantId))) {
      grants.delete(grantId);
      continue;
    }
    count += 1;
    for (const [jti, grantOf] of accessTokens) {
      if (grantOf !== grantId) continue;
      await provider.AccessToken.adapter.destroy(jti);
      accessTokens.delete(jti);
    }
    if (tokens === 'access') continue;
    await provider.RefreshToken.revokeByGrantId(grantId);
    await provider.AuthorizationCode.adapter.revokeByGrantId(grantId);
    await provider.Grant.adapter.destroy(grantId);
    grants.delete(grantId);
  }
  return count;
}

// ---- login and consent pages ----

const escape = (s) => String(s).replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
const page = (title, body) => `<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>${escape(title)}</title></head>
<body><h1>${escape(title)}</h1>
${body}
</body></html>`;

function send(res, status, type, body, headers = {}) {
  res.writeHead(status, { 'content-type': type, 'cache-control': 'no-store', ...headers });
  res.end(body);
}

async function readForm(req) {
  const chunks = [];
  for await (const chunk of req) chunks.push(chunk);
  return new URLSearchParams(Buffer.concat(chunks).toString('utf8'));
}

async function finish(req, res, result, mergeWithLastSubmission) {
  const location = await provider.interactionResult(req, res, result, { mergeWithLastSubmission });
  res.writeHead(303, { location, 'cache-control': 'no-store' });
  res.end();
}

async function interaction(req, res, uid, action) {
  const details = await provider.interactionDetails(req, res);
  if (details.uid !== uid) throw new errors.SessionNotFound('interaction mismatch');
  const { prompt, params, session, grantId } = details;

  if (action === 'abort' && req.method === 'POST') {
    await readForm(req);
    log('interaction', uid, 'denied by the user');
    return finish(req, res, {
      error: 'access_denied',
      error_description: 'End-User denied the authorization',
    }, false);
  }

  if (prompt.name === 'login') {
    if (action === 'login' && req.method === 'POST') {
      const form = await readForm(req);
      if (form.get('login') !== TEST_USER || form.get('password') !== TEST_PASSWORD) {
        log('interaction', uid, 'wrong login or password');
        return send(res, 200, 'text/html; charset=utf-8', page('Sign-in', `
<p class="error">Invalid login or password.</p>
${loginForm(uid)}`));
      }
      log('interaction', uid, 'signed in', TEST_USER);
      return finish(req, res, { login: { accountId: TEST_USER } }, false);
    }
    return send(res, 200, 'text/html; charset=utf-8', page('Sign-in', loginForm(uid)));
  }

  if (prompt.name === 'consent') {
    if (action === 'confirm' && req.method === 'POST') {
      await readForm(req);
      const grant = grantId
        ? await provider.Grant.find(grantId)
        : new provider.Grant({ accountId: session.accountId, clientId: params.client_id });
      const d = prompt.details;
      if (d.missingOIDCScope) grant.addOIDCScope(d.missingOIDCScope.join(' '));
      if (d.missingOIDCClaims) grant.addOIDCClaims(d.missingOIDCClaims);
      if (d.missingResourceScopes) {
        for (const [indicator, scopes] of Object.entries(d.missingResourceScopes)) {
          grant.addResourceScope(indicator, scopes.join(' '));
        }
      }
      log('interaction', uid, 'consent given');
      return finish(req, res, { consent: { grantId: await grant.save() } }, true);
    }
    const client = await provider.Client.find(params.client_id);
    return send(res, 200, 'text/html; charset=utf-8', page('Authorize', `
<p>Client <strong class="client">${escape(client?.clientName ?? params.client_id)}</strong>
(<code class="client-id">${escape(params.client_id)}</code>) asks for scope
<code class="scope">${escape(params.scope ?? '')}</code>
on <code class="resource">${escape(params.resource ?? '')}</code>.</p>
<form method="post" action="/interaction/${escape(uid)}/confirm">
  <button type="submit" name="decision" value="allow">Allow</button>
</form>
<form method="post" action="/interaction/${escape(uid)}/abort">
  <button type="submit" name="decision" value="deny">Deny</button>
</form>`));
  }

  return send(res, 501, 'text/plain', `prompt ${prompt.name} not implemented`);
}

const loginForm = (uid) => `<form method="post" action="/interaction/${escape(uid)}/login">
  <input type="text" name="login" placeholder="login">
  <input type="password" name="password" placeholder="password">
  <button type="submit">Sign-in</button>
</form>
<form method="post" action="/interaction/${escape(uid)}/abort">
  <button type="submit" name="decision" value="deny">Cancel</button>
</form>`;

// ---- routing ----

const providerCallback = provider.callback();

handler = async (req, res) => {
  const url = new URL(req.url, issuer);
  log(req.method, url.pathname);
  try {
    if (url.pathname === '/.well-known/oauth-authorization-server') {
      // RFC 8414 path, same document as OpenID discovery.
      req.url = `/.well-known/openid-configuration${url.search}`;
      return providerCallback(req, res);
    }
    if (url.pathname === '/auth' && req.method === 'GET') {
      recordAuthorization(url.searchParams);
    }
    if (url.pathname === '/token/revocation' && req.method === 'POST') {
      record.revocation_requests += 1;
    }
    const m = url.pathname.match(/^\/interaction\/([^/]+)(?:\/(login|confirm|abort))?$/);
    if (m) {
      return await interaction(req, res, m[1], m[2]);
    }
    if (url.pathname === '/test/log' && req.method === 'GET') {
      return send(res, 200, 'application/json', JSON.stringify(record));
    }
    if (url.pathname === '/test/revoke' && req.method === 'POST') {
      const form = await readForm(req);
      const clientId = url.searchParams.get('client_id') ?? form.get('client_id') ?? undefined;
      const tokens = url.searchParams.get('tokens') ?? form.get('tokens') ?? 'all';
      if (!['all', 'access'].includes(tokens)) {
        return send(res, 400, 'application/json', JSON.stringify({ error: 'tokens must be all or access' }));
      }
      const grants = await revokeGrants({ clientId, tokens });
      log('test revoke', tokens, clientId ?? '(every client)', '->', grants, 'grants');
      return send(res, 200, 'application/json', JSON.stringify({ grants, tokens }));
    }
    return providerCallback(req, res);
  } catch (err) {
    log('error on', req.method, url.pathname, err?.stack ?? err);
    if (!res.headersSent) {
      send(res, err?.statusCode ?? 500, 'application/json', JSON.stringify({
        error: err?.error ?? 'server_error',
        error_description: err?.error_description ?? String(err?.message ?? err),
      }));
    }
  }
};

const shutdown = () => process.exit(0);
process.on('SIGTERM', shutdown);
process.on('SIGINT', shutdown);

process.stdout.write(`${JSON.stringify({ issuer })}\n`);
