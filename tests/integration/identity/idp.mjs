// The identity provider the OAuth tests sign in with: npm `oidc-provider`, configured from
// the environment by tests/integration/identity/provider.py.
//
// IDP_PORT        where to listen (127.0.0.1); the issuer is http://127.0.0.1:<port>
// IDP_JWKS        a file holding the signing keys (private JWKS; the tests keep a copy to
//                 sign tokens the provider would never issue: expired, wrong audience...)
// IDP_RESOURCE    the gateway's resource (`<public_url>/mcp`): JWT access tokens for it
// IDP_USERS       JSON {user: {org, groups}}: each user is also a client_credentials client
//                 (client id = user, secret = `<user>-secret`) whose tokens carry the user's
//                 claims; `<user>-opaque` gets opaque tokens for the same user
// OIDC_PROVIDER   the package's entry file (the test npm prefix)
// IDP_ACCESS_TTL  seconds an access token for a resource lasts (600 unless given)
// IDP_CIMD        "1": clients may be client ID metadata documents (their https URL as the
//                 client_id, fetched here; each fetch logged `fetched client metadata document
//                 <url>`), on loopback too (the package's SSRF guard refuses 127.0.0.1, where
//                 the tests' gateway is; Node trusts its certificate by NODE_EXTRA_CA_CERTS)
//
// Also: the gateway's client (`gateway` / `gateway-secret`): introspection, token exchange
// (RFC 8693, a grant registered below: a person's token for the gateway becomes one for another
// audience, naming the same person and the gateway as actor; each logged as `exchanged ...`),
// client credentials for another audience (the toolhost reads a server's tools with it), and the dashboard's
// sign-in (authorization code + PKCE back to <public_url>/dashboard/callback, RP-initiated
// logout back to /dashboard/signed-out); dynamic client
// registration (the MCP SDK registers itself; each logged as `registered {...}`), devInteractions (the login and consent forms,
// which the tests post to over HTTP), DPoP and revocation.
//
// And two doors for the tests, as an administrator has them at a real provider:
// `POST /admin/revoke?account=<user>` revokes every grant of that person (their refresh
// tokens are then refused, `invalid_grant`), and `POST /admin/down` / `POST /admin/up` take
// the whole provider down (every other request answered 503) and back.
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';

const { default: Provider, errors } = await import(process.env.OIDC_PROVIDER);
// jose, which oidc-provider depends on, in the same node_modules: the exchanged tokens' JOSE.
const jose = await import(join(dirname(process.env.OIDC_PROVIDER), '..', '..', 'jose', 'dist', 'webapi', 'index.js'));

const port = Number(process.env.IDP_PORT);
const issuer = `http://127.0.0.1:${port}`;
const resource = process.env.IDP_RESOURCE;
const users = JSON.parse(process.env.IDP_USERS);
const jwks = JSON.parse(readFileSync(process.env.IDP_JWKS, 'utf8'));
const SCOPES = 'agentcards:read agentcards:execute agentcards:admin';
const UPSTREAM_SCOPES = 'upstream:read upstream:write'; // what servers behind the gateway ask of people's tokens
const TOKEN_EXCHANGE = 'urn:ietf:params:oauth:grant-type:token-exchange';
const ACCESS_TOKEN = 'urn:ietf:params:oauth:token-type:access_token';
const EXCHANGED_TTL = Number(process.env.IDP_EXCHANGED_TTL || 600);
const ACCESS_TTL = Number(process.env.IDP_ACCESS_TTL || 600); // short: refresh is tested

// Whose claims a token carries: its signed-in account, or the user a client stands for.
const userOf = (token) => token.accountId || String(token.clientId).replace(/-opaque$/, '');

const publicUrl = resource.replace(/\/mcp$/, '');
const clients = [
  {
    client_id: 'gateway',
    client_secret: 'gateway-secret',
    grant_types: ['authorization_code', 'client_credentials', TOKEN_EXCHANGE],
    response_types: ['code'],
    redirect_uris: [`${publicUrl}/dashboard/callback`],
    post_logout_redirect_uris: [`${publicUrl}/dashboard/signed-out`],
    scope: `openid profile ${SCOPES} ${UPSTREAM_SCOPES}`,
  },
];
for (const user of Object.keys(users)) {
  for (const suffix of ['', '-opaque']) {
    clients.push({
      client_id: `${user}${suffix}`,
      client_secret: `${user}-secret`,
      grant_types: ['client_credentials'],
      response_types: [],
      redirect_uris: [],
      scope: SCOPES,
    });
  }
}

const cimd = process.env.IDP_CIMD === '1';
const provider = new Provider(issuer, {
  ...(cimd && {
    // Without the dispatcher the package adds (its guard against special-use addresses).
    fetch: (url, { dispatcher, ...options }) => {
      process.stdout.write(`fetched client metadata document ${url}\n`);
      return globalThis.fetch(url, options);
    },
  }),
  clients,
  jwks,
  scopes: ['openid', 'offline_access', ...SCOPES.split(' '), ...UPSTREAM_SCOPES.split(' ')],
  claims: { openid: ['sub'], profile: ['name'] },
  findAccount: (ctx, id) => ({ accountId: id, claims: () => ({ sub: id, name: id }) }),
  extraTokenClaims: (ctx, token) => {
    const user = users[userOf(token)];
    return user ? { org: user.org, groups: user.groups } : undefined;
  },
  pkce: { required: () => true },
  ttl: { AccessToken: ACCESS_TTL, ClientCredentials: ACCESS_TTL, Grant: 600, Session: 600, Interaction: 600 },
  clientBasedCORS: () => true,
  clientDefaults: { id_token_signed_response_alg: 'ES256' },
  conformIdTokenClaims: false, // the ID token names the person (`name`), as most IdPs do
  features: {
    devInteractions: { enabled: true },
    clientIdMetadataDocument: { enabled: cimd, ...(cimd && { ack: 'draft-02' }) },
    rpInitiatedLogout: { enabled: true },
    registration: { enabled: true },
    introspection: { enabled: true },
    revocation: { enabled: true },
    clientCredentials: { enabled: true },
    dPoP: { enabled: true },
    resourceIndicators: {
      enabled: true,
      defaultResource: () => resource,
      useGrantedResource: () => true,
      getResourceServerInfo: (ctx, indicator, client) => {
        if (!indicator.startsWith('http')) throw new errors.InvalidTarget();
        return {
          scope: indicator === resource ? SCOPES : UPSTREAM_SCOPES,
          audience: indicator,
          accessTokenTTL: ACCESS_TTL,
          accessTokenFormat: client.clientId.endsWith('-opaque') ? 'opaque' : 'jwt',
          jwt: { sign: { alg: 'ES256' } },
        };
      },
    },
  },
});
// RFC 8693 token exchange, for the gateway's client only: the subject token must be a JWT
// access token this provider issued for the gateway's resource; the answer is a JWT for the
// requested `audience` (never the gateway's own) naming the same person, with the client as
// actor (`act`), and only the upstream scopes asked for.
const publicKeys = jose.createLocalJWKSet({
  keys: jwks.keys.map(({ d, ...rest }) => rest),
});
const signing = jwks.keys[0];
const signingKey = await jose.importJWK(signing, 'ES256');
async function tokenExchange(ctx) {
  const { client, params } = ctx.oidc;
  if (params.subject_token_type !== ACCESS_TOKEN) {
    throw new errors.InvalidRequest(`subject_token_type must be ${ACCESS_TOKEN}`);
  }
  let claims;
  try {
    ({ payload: claims } = await jose.jwtVerify(params.subject_token, publicKeys, {
      issuer,
      audience: resource,
    }));
  } catch (err) {
    throw new errors.InvalidGrant(`subject_token refused: ${err.message}`);
  }
  const audience = params.audience || params.resource;
  if (!audience || !audience.startsWith('http') || audience === resource) {
    throw new errors.InvalidTarget('audience must name the server the token is for');
  }
  const allowed = new Set(UPSTREAM_SCOPES.split(' '));
  const scope = (params.scope || '').split(' ').filter((s) => allowed.has(s)).join(' ');
  const now = Math.floor(Date.now() / 1000);
  const token = await new jose.SignJWT({
    scope, client_id: client.clientId, act: { sub: client.clientId }, org: claims.org,
  })
    .setProtectedHeader({ alg: 'ES256', kid: signing.kid, typ: 'at+jwt' })
    .setIssuer(issuer).setSubject(claims.sub).setAudience(audience)
    .setIssuedAt(now).setExpirationTime(now + EXCHANGED_TTL).setJti(randomUUID())
    .sign(signingKey);
  process.stdout.write(`exchanged ${claims.sub} for ${audience}\n`);
  ctx.body = {
    access_token: token,
    issued_token_type: ACCESS_TOKEN,
    token_type: 'Bearer',
    expires_in: EXCHANGED_TTL,
    scope,
  };
}
provider.registerGrantType(TOKEN_EXCHANGE, tokenExchange, [
  'subject_token', 'subject_token_type', 'audience', 'scope', 'requested_token_type',
  'actor_token', 'actor_token_type', 'resource',
], ['resource']);

// Each dynamic registration, as the client asked for it (`registered {...}`): what a client
// says it is (its application_type, redirect URIs, how it authenticates).
provider.on('registration_create.success', (ctx, client) => {
  const { client_id, application_type, redirect_uris, token_endpoint_auth_method } = client.metadata();
  process.stdout.write(`registered ${JSON.stringify({
    client_id, application_type, redirect_uris, token_endpoint_auth_method,
  })}\n`);
});

const grantsOf = new Map(); // account -> the ids of its grants (for /admin/revoke)
provider.on('grant.saved', (grant) => {
  if (!grantsOf.has(grant.accountId)) grantsOf.set(grant.accountId, new Set());
  grantsOf.get(grant.accountId).add(grant.jti);
});
provider.on('grant.revoked', (ctx, grantId) => { // a client revoked a token (RFC 7009)
  for (const [account, ids] of grantsOf) {
    if (ids.has(grantId)) process.stdout.write(`a client revoked a grant of ${account}\n`);
  }
});
let down = false;
provider.use(async (ctx, next) => {
  if (ctx.method === 'POST' && ctx.path === '/admin/revoke') {
    const account = ctx.query.account;
    for (const id of grantsOf.get(account) || []) {
      const grant = await provider.Grant.find(id);
      if (grant) await grant.destroy();
    }
    grantsOf.delete(account);
    process.stdout.write(`revoked the grants of ${account}\n`);
    ctx.status = 204;
    return;
  }
  if (ctx.method === 'POST' && (ctx.path === '/admin/down' || ctx.path === '/admin/up')) {
    down = ctx.path === '/admin/down';
    ctx.status = 204;
    return;
  }
  if (down) {
    ctx.status = 503;
    ctx.body = 'down for maintenance';
    return;
  }
  await next();
});

provider.proxy = false;
provider.listen(port, '127.0.0.1', () => {
  process.stdout.write(`ready ${issuer}\n`);
});
