import Codecs
import Foundation
import JOSE

/// The HS256 secret the tests configure, as a Supabase project's legacy JWT secret would be.
public let testJWTSecret = "test-secret-with-at-least-32-characters-of-entropy"

/// A caregiver access token as Supabase Auth issues it (HS256, no `kid`).
public func caregiverToken(
    _ caregiverID: UUID, expiresIn: TimeInterval = 3600, role: String = "authenticated", secret: String = testJWTSecret,
    issuedAt: Date = Date()
) throws -> String {
    let now = issuedAt.timeIntervalSince1970.rounded(.down)
    return try JWTSigner.sign(
        header: [:],
        claims: [
            "sub": .string(caregiverID.uuidString.lowercased()), "aud": .string("authenticated"),
            "role": .string(role), "exp": .number(now + expiresIn), "iat": .number(now),
            "is_anonymous": .bool(false),
        ],
        using: .hmac(secret: Array(secret.utf8)))
}

/// Encodes a JSON object body.
public func json(_ members: [String: JSONValue]) -> String {
    (try? JSONEncoder().encode(JSONValue.object(members))).map { String(decoding: $0, as: UTF8.self) } ?? "{}"
}
