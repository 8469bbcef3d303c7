import CCurl

/// Requests one after another on one libcurl easy handle, kept: its live connection (kept alive), its caches and its
/// buffers stay from one request to the next. For a loop that talks to one host one request at a time — the
/// Runtime API, two requests per invocation — where a ``CurlClient`` would make and clean up an easy handle for each
/// request and run its scheduling of many transfers for one. Part of the thin libcurl binding. Not `Sendable`: one
/// session belongs to one thread.
public final class CurlSession {
    private let handle: UnsafeMutableRawPointer

    /// Loads libcurl if nothing has yet.
    /// - Throws: ``CurlError`` when libcurl cannot be loaded or cannot make a handle.
    public init() throws(CurlError) {
        try CurlLibrary.load()
        guard let handle = ccurl_easy_init() else { throw CurlError(.setupFailed) }
        self.handle = handle
    }

    deinit {
        ccurl_easy_cleanup(handle)
    }

    /// Performs `request` and waits for it, at most `timeoutMilliseconds` (connection included).
    public func perform(_ request: CurlRequest, timeoutMilliseconds: Int) -> Result<CurlResponse, CurlError> {
        do {
            let transfer = try CurlTransfer(
                request: request, tag: 0, timeoutMilliseconds: timeoutMilliseconds, lent: handle)
            return transfer.result(code: ccurl_easy_perform(handle))
        } catch {
            return .failure(error)
        }
    }
}
