import WebAuthnCore
import WebAuthnMetadata
import WebAuthnConformance
import _WebAuthnEncoding
import _WebAuthnCrypto

/// The code of the WebAuthnError `body` throws, nil if it succeeds.
func errorCode(_ body: () async throws -> Void) async -> String? {
    do {
        try await body()
        return nil
    } catch let error as WebAuthnError {
        return error.code.rawValue
    } catch {
        return "not a WebAuthnError: \(error)"
    }
}
