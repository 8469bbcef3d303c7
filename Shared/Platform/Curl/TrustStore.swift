#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Which certificate authorities every outgoing TLS connection (FCM, Google's token endpoint, the Supabase JWKS)
/// trusts. Verification of the peer's certificate and of its host name is always on; only the anchors change.
///
/// OpenSSL's convention, read with the rest of the ``Configuration`` (once per process):
/// - `SSL_CERT_FILE` set → that PEM bundle and nothing else (unless `SSL_CERT_DIR` is set too);
/// - `SSL_CERT_DIR` set → that hashed directory (with the file, when both are set);
/// - neither → the system bundle, found where the distribution keeps it. The functions are built on Debian and run
///   on Amazon Linux 2023, whose bundle lives elsewhere; libcurl only knows the path compiled into it, so the
///   known locations are probed in order and the first that exists is used.
public struct TrustStore: Sendable, Equatable {
    /// A PEM file of trusted certificates (`CURLOPT_CAINFO`), or `nil` for libcurl's compiled-in default.
    public let caFile: String?
    /// A hashed certificate directory (`CURLOPT_CAPATH`), or `nil`.
    public let caDirectory: String?
    /// Whether libcurl's compiled-in directory should be dropped: true when `SSL_CERT_FILE` alone was given, so
    /// that the named bundle is the whole trust (a test's throwaway CA, a pinned corporate root).
    public let excludesDefaultDirectory: Bool

    /// System bundles, most likely first: Debian and Ubuntu; Amazon Linux 2023, Fedora and RHEL; openSUSE;
    /// Alpine and macOS.
    public static let systemBundleCandidates = [
        "/etc/ssl/certs/ca-certificates.crt",
        "/etc/pki/tls/certs/ca-bundle.crt",
        "/etc/ssl/ca-bundle.pem",
        "/etc/ssl/cert.pem",
    ]

    /// The process's trust, from its environment.
    public static let process = TrustStore(
        environment: { name in getenv(name).map { String(cString: $0) } },
        fileExists: { path in access(path, R_OK) == 0 })

    /// - Parameters:
    ///   - environment: reads a variable (an empty value counts as unset).
    ///   - fileExists: whether a path is a readable file (for the system bundle probe).
    public init(environment: (String) -> String?, fileExists: (String) -> Bool) {
        let file = environment("SSL_CERT_FILE").flatMap { $0.isEmpty ? nil : $0 }
        let directory = environment("SSL_CERT_DIR").flatMap { $0.isEmpty ? nil : $0 }
        switch (file, directory) {
        case (nil, nil):
            caFile = Self.systemBundleCandidates.first(where: fileExists)
            caDirectory = nil
            excludesDefaultDirectory = false
        case (let file?, nil):
            caFile = file
            caDirectory = nil
            excludesDefaultDirectory = true
        case (let file, let directory?):
            caFile = file
            caDirectory = directory
            excludesDefaultDirectory = false
        }
    }

    /// Trust in exactly one PEM bundle (a test's throwaway CA).
    public init(caFile: String) {
        self.caFile = caFile
        caDirectory = nil
        excludesDefaultDirectory = true
    }
}
