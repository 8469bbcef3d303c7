import HTTPTypes
import Hummingbird

/// Who may use the dev stack's local doors — the console at `/_dev`, the emulator's inspection and control routes
/// (`/_emulator/fcm/…`, `/_emulator/jwks…`): this machine's developer, not a page they happen to visit.
///
/// - the peer must be a loopback address (when the server's context knows it);
/// - the `Host` must name a loopback host: a page of another site whose name resolves to 127.0.0.1 (DNS rebinding)
///   names its own;
/// - an `Origin` other than the request's own, or a `Sec-Fetch-Site` of `cross-site`/`same-site`, is another page's
///   request (another site's, or another local server's): such a page may send a request to 127.0.0.1 without
///   reading the answer (a `text/plain` POST needs no preflight), and is refused;
/// - a `POST`/`PUT` must say `application/json`, which a cross-site page cannot send without a preflight that is
///   never answered.
public enum LocalControl {
    /// - Throws: a 403 `HTTPError` saying which rule the request broke.
    public static func check<Context: RequestContext>(_ request: Request, _ context: Context) throws {
        if let peer = (context as? any RemoteAddressRequestContext)?.remoteAddress?.ipAddress,
            !FCMEmulator.isLoopback(peer)
        {
            throw HTTPError(.forbidden, message: "answered to loopback clients only")
        }
        guard let authority = request.head.authority, isLoopbackAuthority(authority) else {
            throw HTTPError(.forbidden, message: "answered to requests for 127.0.0.1 or localhost only")
        }
        if let origin = request.headers[.origin], !isSameLoopbackOrigin(origin, authority: authority) {
            throw HTTPError(.forbidden, message: "not answered to another site's page")
        }
        if let site = request.headers[HTTPField.Name("sec-fetch-site")!], site == "cross-site" || site == "same-site" {
            throw HTTPError(.forbidden, message: "not answered to another site's page")
        }
        if request.method == .post || request.method == .put {
            let type = request.headers[.contentType]?.lowercased() ?? ""
            guard type == "application/json" || type.hasPrefix("application/json;") else {
                throw HTTPError(.unsupportedMediaType, message: "send application/json")
            }
        }
    }

    /// `localhost`, `::1` or a dotted IPv4 loopback address, with or without a port.
    public static func isLoopbackAuthority(_ authority: String) -> Bool {
        var host = Substring(authority)
        if host.hasPrefix("[") {
            host = host.dropFirst().prefix { $0 != "]" }
        } else if let colon = host.lastIndex(of: ":") {
            host = host[..<colon]
        }
        return host == "localhost" || host == "::1"
            || (FCMEmulator.isLoopback(String(host))
                && host.split(separator: ".").count == 4 && host.allSatisfy { $0.isNumber || $0 == "." })
    }

    /// `http(s)://` and the request's own (loopback) authority: the page of another local server (another port)
    /// is another origin; `null` (a sandboxed or file page) is none.
    static func isSameLoopbackOrigin(_ origin: String, authority: String) -> Bool {
        for scheme in ["http://", "https://"] where origin.lowercased().hasPrefix(scheme) {
            let from = origin.dropFirst(scheme.count).lowercased()
            return from == authority.lowercased() && isLoopbackAuthority(from)
        }
        return false
    }
}
