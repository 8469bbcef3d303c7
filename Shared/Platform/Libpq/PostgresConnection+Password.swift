import CLibpq

extension PostgresConnection {
    /// The `user` and `password` a connection string (a libpq URL or key/value string) holds, percent-decoding done
    /// by libpq itself (`PQconninfoParse`; nothing is sent). `nil` when libpq cannot parse it.
    public static func credentials(in connectionString: String) -> (user: String?, password: String?)? {
        guard !connectionString.utf8.contains(0) else { return nil }
        var message: UnsafeMutablePointer<CChar>?
        let options = connectionString.withCString { PQconninfoParse($0, &message) }
        if let message { PQfreemem(message) }
        guard let options else { return nil }
        defer { PQconninfoFree(options) }
        var user: String?
        var password: String?
        var option = options
        while let keyword = option.pointee.keyword {
            if let value = option.pointee.val {
                switch String(cString: keyword) {
                case "user": user = String(cString: value)
                case "password": password = String(cString: value)
                default: break
                }
            }
            option += 1
        }
        return (user, password)
    }

    /// The SCRAM-SHA-256 verifier of `password` for `role` (`SCRAM-SHA-256$<iterations>:<salt>$<StoredKey>:<ServerKey>`),
    /// computed here by libpq's `PQencryptPasswordConn` with a fresh random salt, as psql's `\password` does. Nothing is
    /// sent to the server: given the verifier as the password, PostgreSQL stores it as it is, so the clear text never
    /// reaches the server, its statement log or `pg_stat_activity`.
    /// - Throws: ``PostgresError`` `.invalidParameter` for a password holding a NUL; `.connectionLost` when the
    ///   connection is closed or libpq cannot compute it.
    public func scramVerifier(password: String, role: String) throws(PostgresError) -> String {
        guard let handle else { throw PostgresError(.connectionLost, serverMessage: "connection closed") }
        guard !password.utf8.contains(0), !role.utf8.contains(0) else {
            throw PostgresError(.invalidParameter, serverMessage: "a password or role name holds a NUL character")
        }
        let encrypted = password.withCString { password in
            role.withCString { role in PQencryptPasswordConn(handle, password, role, "scram-sha-256") }
        }
        guard let encrypted else {
            throw PostgresError(.connectionLost, serverMessage: Self.errorMessage(of: handle))
        }
        defer { PQfreemem(encrypted) }
        return String(cString: encrypted)
    }
}
