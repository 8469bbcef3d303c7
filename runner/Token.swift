import ArgumentParser
import CaregiverPush
import Foundation

/// `runner token`: a caregiver access token signed with `SUPABASE_JWT_SECRET`, for local development only.
struct Token: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Print an HS256 caregiver token signed with SUPABASE_JWT_SECRET (local development only).",
        discussion: """
            Environment: SUPABASE_JWT_SECRET (at least 32 characters). The `make dev` stack's secret lives in \
            .data/dev-jwt-secret: SUPABASE_JWT_SECRET="$(cat .data/dev-jwt-secret)" runner token
            """)

    @Option(help: "The caregiver's user id (the token's sub); a new one when omitted.")
    var caregiver: String?

    @Option(help: "Lifetime in seconds.")
    var expiresIn: Int = 86_400

    func run() {
        reportingErrors { try start() }
    }

    private func start() throws {
        guard let secret = ProcessInfo.processInfo.environment["SUPABASE_JWT_SECRET"], !secret.isEmpty else {
            throw ValidationError("SUPABASE_JWT_SECRET is not set")
        }
        let subject =
            try caregiver.map { text -> UUID in
                guard let id = UUID(exactly: text) else { throw ValidationError("--caregiver must be a UUID") }
                return id
            } ?? UUID()
        let now = Date().timeIntervalSince1970.rounded(.down)
        let token = try JWTSigner.sign(
            header: [:],
            claims: [
                "sub": .string(subject.uuidString.lowercased()), "aud": .string("authenticated"),
                "role": .string("authenticated"), "iat": .number(now), "exp": .number(now + Double(expiresIn)),
                "is_anonymous": .bool(false),
            ],
            using: .hmac(secret: Array(secret.utf8)))
        print(token)
    }
}
