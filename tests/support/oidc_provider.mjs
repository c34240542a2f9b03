// A real OpenID Connect provider for the single sign-on tests (tests/support/oidc.py):
// node's oidc-provider, with a minimal login page of its own instead of devInteractions
// (whose pages import web fonts from the internet, which the browser tests would see as
// console errors), no consent prompt (a first-party client, as a company's IdP is
// usually set up) and a plain logout confirmation.
//
//   node tests/support/oidc_provider.mjs CONFIG.json
//
// CONFIG: {"port", "issuer", "clients": [...oidc-provider client metadata],
//          "accounts": "/path/accounts.json", "id_token_ttl"?: seconds}. The accounts file maps a login name to
// {"sub", "claims": {...}}, and is read again at every findAccount, so a test changes a
// person's groups at the provider by rewriting it. The process prints "ready <issuer>"
// on stdout once it listens.
import fs from 'node:fs';
import http from 'node:http';

import Provider from 'oidc-provider';

const config = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));

function accounts() {
  return JSON.parse(fs.readFileSync(config.accounts, 'utf8'));
}

function accountBySub(sub) {
  return Object.values(accounts()).find((a) => a.sub === sub);
}

function escape(text) {
  return String(text).replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

function page(title, body) {
  // No favicon request (a 404 the browser tests would see as a console error).
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><link rel="icon" href="data:,">
<title>${escape(title)}</title>
</head><body><main><h1>${escape(title)}</h1>${body}</main></body></html>`;
}

const provider = new Provider(config.issuer, {
  clients: config.clients,
  cookies: { keys: ['a test provider, not a secret'] },
  claims: {
    openid: ['sub'],
    email: ['email', 'email_verified'],
    profile: ['name', 'preferred_username'],
    groups: ['groups'],
  },
  scopes: ['openid', 'email', 'profile', 'groups', 'offline_access'],
  pkce: { required: () => true, methods: ['S256'] },
  // config.id_token_ttl: seconds an ID token is valid (oidc-provider's default is an hour).
  ttl: config.id_token_ttl ? { IdToken: config.id_token_ttl } : {},
  features: {
    devInteractions: { enabled: false },
    rpInitiatedLogout: {
      enabled: true,
      logoutSource: async (ctx, form) => {
        ctx.body = page('Sign out of the test provider?', `${form}
<button type="submit" form="op.logoutForm" value="yes" name="logout">Yes, sign me out</button>
<button type="submit" form="op.logoutForm">No, stay signed in</button>`);
      },
      postLogoutSuccessSource: async (ctx) => {
        ctx.body = page('Signed out', '<p>You are signed out of the test provider.</p>');
      },
    },
  },
  async findAccount(ctx, sub) {
    const account = accountBySub(sub);
    if (!account) return undefined;
    return {
      accountId: sub,
      async claims() {
        // Read again here too: the claims are those of the moment the token is made.
        return { sub, ...(accountBySub(sub)?.claims ?? {}) };
      },
    };
  },
  // No consent screen: every scope the client asks for is granted.
  async loadExistingGrant(ctx) {
    const grant = new ctx.oidc.provider.Grant({
      clientId: ctx.oidc.client.clientId,
      accountId: ctx.oidc.session.accountId,
    });
    grant.addOIDCScope(ctx.oidc.params.scope);
    await grant.save();
    return grant;
  },
  async renderError(ctx, out) {
    ctx.type = 'html';
    ctx.body = page('Provider error', `<pre>${escape(JSON.stringify(out))}</pre>`);
  },
});

async function readForm(req) {
  let body = '';
  for await (const chunk of req) body += chunk;
  return new URLSearchParams(body);
}

async function interaction(req, res, uid) {
  const details = await provider.interactionDetails(req, res);
  if (details.uid !== uid) throw new Error('interaction mismatch');
  if (req.method === 'GET') {
    res.setHeader('content-type', 'text/html; charset=utf-8');
    res.end(page('Sign in to the test provider', `
<form method="post" action="/interaction/${escape(uid)}">
  <label for="login">Login</label> <input id="login" name="login" autofocus required>
  <label for="password">Password</label> <input id="password" name="password" type="password">
  <button type="submit">Sign in</button>
</form>`));
    return;
  }
  const form = await readForm(req);
  const account = accounts()[form.get('login')];
  if (!account) {
    res.statusCode = 200;
    res.setHeader('content-type', 'text/html; charset=utf-8');
    res.end(page('Sign in to the test provider', '<p role="alert">No such account.</p>'));
    return;
  }
  await provider.interactionFinished(req, res, { login: { accountId: account.sub } }, {
    mergeWithLastSubmission: false,
  });
}

const callback = provider.callback();
const server = http.createServer((req, res) => {
  const match = /^\/interaction\/([^/?]+)$/.exec(req.url.split('?')[0]);
  if (!match) {
    callback(req, res);
    return;
  }
  interaction(req, res, match[1]).catch((err) => {
    res.statusCode = 500;
    res.end(String(err));
  });
});
server.listen(config.port, '127.0.0.1', () => {
  process.stdout.write(`ready ${config.issuer}\n`);
});
