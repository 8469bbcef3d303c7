import Codecs
import Curl
import CaregiverPush
import Foundation
import TestFixtures

/// The emulator's fake Supabase JWKS endpoint: what it serves, whether it is down, how often it was fetched.
extension FCMFake {
    /// `SUPABASE_JWKS_URL` for this fake, built from its base URL (whatever scheme the emulator speaks). The query
    /// names this fake: the shared cache is keyed by URL, and a later fake may get an earlier one's port, whose row
    /// (a recent attempt, a document of other keys) would otherwise be this test's starting state.
    package var jwksURL: String { baseURL + "/auth/v1/.well-known/jwks.json?fake=" + clientEmail.prefix { $0 != "@" } }

    /// Serves `document` from now on (the key sets a test rotates through, or garbage on purpose).
    package func serveJWKS(_ document: String) throws {
        // POST: the project's HTTP client sends a body only with POST.
        try control("POST", "/_emulator/jwks", body: document)
    }

    /// Serves `{"keys": [...]}`.
    package func serveJWKS(keys: [JSONValue]) throws {
        try serveJWKS(TokenFixture.text(.object(["keys": .array(keys)])))
    }

    /// While down, the endpoint answers 503.
    package func setJWKSDown(_ down: Bool) throws {
        try control("POST", "/_emulator/jwks/down", body: down ? #"{"down":true}"# : #"{"down":false}"#)
    }

    /// GETs of the JWKS document so far, answered or not.
    package var jwksFetches: Int {
        get throws {
            guard
                case .success(let response) = CurlClient.perform(
                    CurlRequest(url: baseURL + "/_emulator/jwks/stats", trust: trust), timeoutMilliseconds: 5000),
                response.status == 200, let fetches = try JSONValue.parse(response.body)["fetches"]?.integerValue
            else { throw FakeError.badAnswer }
            return Int(fetches)
        }
    }

    private func control(_ method: String, _ path: String, body: String) throws {
        let request = CurlRequest(
            method: method, url: baseURL + path, headers: [("Content-Type", "application/json")],
            body: Array(body.utf8), trust: trust)
        guard case .success(let response) = CurlClient.perform(request, timeoutMilliseconds: 5000),
            response.status == 200
        else { throw FakeError.badAnswer }
    }
}
