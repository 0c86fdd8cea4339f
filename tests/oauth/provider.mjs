// A real OpenID provider for toolhost's OAuth tests: npm's certified
// `oidc-provider` (installed by tests/mcpservers/install.sh), on 127.0.0.1,
// issuing JWT access tokens for one protected resource (toolhost's /mcp).
//
//   PORT=P node provider.mjs --modules DIR --resource URL --scopes "calc files" [--format jwt|opaque]
//
// DIR is the node_modules that holds oidc-provider.
// Open dynamic client registration (RFC 7591), authorization code with PKCE,
// resource indicators (RFC 8707): a token is issued for `--resource` only,
// with `aud` = that resource. Nobody types a password here: the login and
// consent steps are answered by this script as the user `alice`, who grants
// what the client asks for within `--scopes`. Prints `ready <issuer>` once
// it listens. Toolhost introspects opaque tokens as the client `toolhost`.
import http from 'node:http';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';

const { values: args } = parseArgs({
  options: {
    modules: { type: 'string' },
    resource: { type: 'string' },
    scopes: { type: 'string', default: '' },
    format: { type: 'string', default: 'jwt' },
    account: { type: 'string', default: 'alice' },
  },
});
const { default: Provider, errors } = await import(
  pathToFileURL(join(args.modules, 'oidc-provider/lib/index.js')).href
);
const port = Number(process.env.PORT);
const issuer = `http://127.0.0.1:${port}`;
const resourceScopes = args.scopes.split(' ').filter(Boolean);

const provider = new Provider(issuer, {
  clients: [
    // Toolhost itself, for token introspection (RFC 7662) of opaque tokens.
    {
      client_id: 'toolhost',
      client_secret: 'toolhost-introspection-secret',
      grant_types: [],
      response_types: [],
      redirect_uris: [],
    },
  ],
  scopes: ['openid', 'offline_access', ...resourceScopes],
  features: {
    devInteractions: { enabled: false },
    registration: { enabled: true },
    introspection: { enabled: true },
    resourceIndicators: {
      enabled: true,
      defaultResource: () => args.resource,
      useGrantedResource: () => true,
      getResourceServerInfo: (_ctx, indicator) => {
        if (indicator !== args.resource) {
          throw new errors.InvalidTarget(`unknown resource ${indicator}`);
        }
        return {
          scope: resourceScopes.join(' '),
          audience: args.resource,
          accessTokenTTL: 300,
          accessTokenFormat: args.format,
          ...(args.format === 'jwt' ? { jwt: { sign: { alg: 'RS256' } } } : {}),
        };
      },
    },
  },
  interactions: { url: (_ctx, interaction) => `/interaction/${interaction.uid}` },
  findAccount: (_ctx, sub) => ({ accountId: sub, claims: () => ({ sub }) }),
});

// The user's part: log in as `--account`, then grant what is missing.
async function interaction(req, res) {
  const details = await provider.interactionDetails(req, res);
  const { prompt, params, session } = details;
  let result;
  if (prompt.name === 'login') {
    result = { login: { accountId: args.account } };
  } else {
    const grant = details.grantId
      ? await provider.Grant.find(details.grantId)
      : new provider.Grant({ accountId: session.accountId, clientId: params.client_id });
    if (prompt.details.missingOIDCScope) {
      grant.addOIDCScope(prompt.details.missingOIDCScope.join(' '));
    }
    for (const [indicator, scopes] of Object.entries(prompt.details.missingResourceScopes ?? {})) {
      grant.addResourceScope(indicator, scopes.join(' '));
    }
    result = { consent: { grantId: await grant.save() } };
  }
  await provider.interactionFinished(req, res, result, { mergeWithLastSubmission: true });
}

const callback = provider.callback();
const server = http.createServer((req, res) => {
  if (req.url.startsWith('/interaction/')) {
    interaction(req, res).catch((e) => {
      res.statusCode = 500;
      res.end(String(e));
    });
  } else {
    callback(req, res);
  }
});
server.listen(port, '127.0.0.1', () => {
  console.log(`ready ${issuer}`);
});
