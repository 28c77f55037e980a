// A real OpenID provider for the console sign-in tests: npm's oidc-provider (OpenID certified),
// started by tests/support/oidc_provider.py as
//   node provider.mjs <port> <issuer> <redirect_uri>
// Its development login form takes any user name (any password): the name picks the groups below.
// One public client, `dlq-console`, code flow with S256 PKCE required. Prints "ready" once listening.
import Provider from "oidc-provider";

const [port, issuer, redirectUri] = process.argv.slice(2);
const GROUPS = { vera: ["staff"], otto: ["staff", "sre"], ada: ["sre-leads"] };

const provider = new Provider(issuer, {
  clients: [{
    client_id: "dlq-console",
    token_endpoint_auth_method: "none",
    redirect_uris: [redirectUri],
    grant_types: ["authorization_code"],
    response_types: ["code"],
  }],
  claims: { openid: ["sub", "preferred_username", "groups"] },
  conformIdTokenClaims: false,
  pkce: { required: () => true },
  cookies: { keys: ["dlq-bridge-test-only"] },
  async findAccount(_ctx, id) {
    return {
      accountId: id,
      async claims() {
        return { sub: id, preferred_username: id, groups: GROUPS[id] || [] };
      },
    };
  },
});
provider.proxy = false;
provider.listen(Number(port), "127.0.0.1", () => {
  console.log("ready");
});
