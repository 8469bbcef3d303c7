import Curl
import Testing

@testable import FunctionRuntime

/// What the Parameters and Secrets extension's client makes of a request that got no answer (``SecretsExtension``'s
/// `interpret`): each failure named for the log, never with the secret.
@Suite("the secrets extension's client: failures without an answer")
struct SecretsExtensionAnswerTests {
    @Test("nothing listening is the extension not started; a libcurl that does not load is named, with the library")
    func failures() {
        let notListening = SecretsExtension.interpret(.failure(CurlError(.connectionFailed, curlCode: 7)))
        #expect(notListening == .failure(SecretsExtensionError(.notListening)))
        let detail = "cannot load libcurl.so.4: libcurl.so.4: cannot open shared object file: No such file or directory"
        let unloadable = SecretsExtension.interpret(.failure(CurlError(.libraryUnavailable, detail: detail)))
        guard case .failure(let error) = unloadable else {
            Issue.record("an answer from nothing: \(unloadable)")
            return
        }
        #expect(error.kind == .clientUnavailable)
        #expect(error.description == "the HTTP client could not be loaded: \(detail)")
        // Not a start-up to wait out: asking again loads nothing.
        #expect(!error.isStartingUp)
        #expect(
            SecretsExtension.interpret(.failure(CurlError(.timedOut, curlCode: 28)))
                == .failure(SecretsExtensionError(.unreachable)))
    }
}
