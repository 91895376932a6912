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
//
// Also: the gateway's client (`gateway` / `gateway-secret`): introspection, and the dashboard's
// sign-in (authorization code + PKCE back to <public_url>/dashboard/callback, RP-initiated
// logout back to /dashboard/signed-out); dynamic client
// registration (the MCP SDK registers itself), devInteractions (the login and consent forms,
// which the tests post to over HTTP), DPoP and revocation.
import { readFileSync } from 'node:fs';

const { default: Provider, errors } = await import(process.env.OIDC_PROVIDER);

const port = Number(process.env.IDP_PORT);
const issuer = `http://127.0.0.1:${port}`;
const resource = process.env.IDP_RESOURCE;
const users = JSON.parse(process.env.IDP_USERS);
const jwks = JSON.parse(readFileSync(process.env.IDP_JWKS, 'utf8'));
const SCOPES = 'agentcards:read agentcards:execute agentcards:admin';

// Whose claims a token carries: its signed-in account, or the user a client stands for.
const userOf = (token) => token.accountId || String(token.clientId).replace(/-opaque$/, '');

const publicUrl = resource.replace(/\/mcp$/, '');
const clients = [
  {
    client_id: 'gateway',
    client_secret: 'gateway-secret',
    grant_types: ['authorization_code'],
    response_types: ['code'],
    redirect_uris: [`${publicUrl}/dashboard/callback`],
    post_logout_redirect_uris: [`${publicUrl}/dashboard/signed-out`],
    scope: `openid profile ${SCOPES}`,
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

const provider = new Provider(issuer, {
  clients,
  jwks,
  scopes: ['openid', 'offline_access', ...SCOPES.split(' ')],
  claims: { openid: ['sub'], profile: ['name'] },
  findAccount: (ctx, id) => ({ accountId: id, claims: () => ({ sub: id, name: id }) }),
  extraTokenClaims: (ctx, token) => {
    const user = users[userOf(token)];
    return user ? { org: user.org, groups: user.groups } : undefined;
  },
  pkce: { required: () => true },
  ttl: { AccessToken: 600, ClientCredentials: 600, Grant: 600, Session: 600, Interaction: 600 },
  clientBasedCORS: () => true,
  clientDefaults: { id_token_signed_response_alg: 'ES256' },
  conformIdTokenClaims: false, // the ID token names the person (`name`), as most IdPs do
  features: {
    devInteractions: { enabled: true },
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
          scope: SCOPES,
          audience: indicator,
          accessTokenTTL: 600,
          accessTokenFormat: client.clientId.endsWith('-opaque') ? 'opaque' : 'jwt',
          jwt: { sign: { alg: 'ES256' } },
        };
      },
    },
  },
});
provider.proxy = false;
provider.listen(port, '127.0.0.1', () => {
  process.stdout.write(`ready ${issuer}\n`);
});
