"""A FAPI 2.0-shaped login with Authlib, driven by test/e2e/fapi-clients.test.ts.

Authlib (https://authlib.org) is the RP library here: its OAuth2Session makes the authorization URL,
redeems the code with PKCE and refreshes, authenticating with its own private_key_jwt (RFC 7523).
Authlib has no pushed authorization request helper and no DPoP client, so the script pushes the
request with requests and signs DPoP proofs (RFC 9449 §4.2) with joserfc, Authlib's JOSE library.

Protocol with the test, one JSON object per line: it prints {"authorization_url"}, reads the callback
URL the browser reached, then prints {"result": {...}} with what it saw.
"""

import base64
import hashlib
import json
import sys
import time

import requests
from authlib.common.security import generate_token
from authlib.integrations.requests_client import OAuth2Session
from authlib.oauth2.rfc7523 import PrivateKeyJWT, private_key_jwt_sign
from authlib.oauth2.rfc7636 import create_s256_code_challenge
from joserfc import jwk, jwt

JWT_BEARER = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def main() -> None:
    cfg = json.loads(sys.argv[1])
    issuer = cfg["issuer"]
    meta = requests.get(f"{issuer}/.well-known/openid-configuration", timeout=10).json()
    client_key = jwk.import_key(cfg["client_jwk"])
    dpop_key = jwk.generate_key("EC", "P-256")
    public_jwk = dpop_key.as_dict(private=False)

    def proof(htm: str, htu: str, access_token: str | None = None) -> str:
        claims = {"jti": generate_token(24), "htm": htm, "htu": htu, "iat": int(time.time())}
        if access_token:
            claims["ath"] = b64url(hashlib.sha256(access_token.encode()).digest())
        return jwt.encode({"typ": "dpop+jwt", "alg": "ES256", "jwk": public_jwk}, claims, dpop_key)

    # Keyway takes the issuer identifier alone as an assertion's audience (RFC 7523 §3, RFC 10070);
    # Authlib's PrivateKeyJWT puts the URL it is given there.
    session = OAuth2Session(
        cfg["client_id"],
        client_key,
        token_endpoint_auth_method="private_key_jwt",
        scope="openid email offline_access",
        redirect_uri=cfg["redirect_uri"],
    )
    session.register_client_auth_method(PrivateKeyJWT(issuer, alg="ES256"))

    verifier = generate_token(48)
    state = generate_token(20)
    par_endpoint = meta["pushed_authorization_request_endpoint"]
    pushed = requests.post(
        par_endpoint,
        data={
            "response_type": "code",
            "client_id": cfg["client_id"],
            "redirect_uri": cfg["redirect_uri"],
            "scope": "openid email offline_access",
            "state": state,
            "nonce": generate_token(20),
            "code_challenge": create_s256_code_challenge(verifier),
            "code_challenge_method": "S256",
            "client_assertion_type": JWT_BEARER,
            "client_assertion": private_key_jwt_sign(client_key, cfg["client_id"], issuer, alg="ES256"),
        },
        # RFC 9449 §10.1: a proof at the PAR endpoint binds the code to this key.
        headers={"DPoP": proof("POST", par_endpoint)},
        timeout=10,
    )
    assert pushed.status_code == 201, pushed.text
    request_uri = pushed.json()["request_uri"]
    url, _ = session.create_authorization_url(meta["authorization_endpoint"], state=state, request_uri=request_uri)
    print(json.dumps({"authorization_url": url}), flush=True)

    callback = sys.stdin.readline().strip()
    token_endpoint = meta["token_endpoint"]
    tokens = session.fetch_token(
        token_endpoint,
        authorization_response=callback,
        code_verifier=verifier,
        headers={"DPoP": proof("POST", token_endpoint)},
    )
    userinfo_endpoint = meta["userinfo_endpoint"]

    def userinfo(access_token: str, scheme: str = "DPoP") -> requests.Response:
        headers = {"Authorization": f"{scheme} {access_token}"}
        if scheme == "DPoP":
            headers["DPoP"] = proof("GET", userinfo_endpoint, access_token)
        return requests.get(userinfo_endpoint, headers=headers, timeout=10)

    first = userinfo(tokens["access_token"])
    as_bearer = userinfo(tokens["access_token"], "Bearer")
    refreshed = session.refresh_token(
        token_endpoint,
        refresh_token=tokens["refresh_token"],
        headers={"DPoP": proof("POST", token_endpoint)},
    )
    second = userinfo(refreshed["access_token"])
    print(
        json.dumps(
            {
                "result": {
                    "token_type": tokens["token_type"],
                    "refreshed_token_type": refreshed["token_type"],
                    "access_token": tokens["access_token"],
                    "id_token": tokens["id_token"],
                    "userinfo": first.json(),
                    "userinfo_status": first.status_code,
                    "bearer_status": as_bearer.status_code,
                    "refreshed_rotated": refreshed["refresh_token"] != tokens["refresh_token"],
                    "refreshed_userinfo": second.json(),
                    "dpop_jkt": dpop_key.thumbprint(),
                }
            }
        ),
        flush=True,
    )


if __name__ == "__main__":
    main()
