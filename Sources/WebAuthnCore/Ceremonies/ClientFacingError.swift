public import _WebAuthnEncoding

/// What a failure may tell the client that caused it, and the HTTP status it answers with: the
/// rules `WebAuthnRoutes` applies, for servers that call the engine from routes of their own
/// (Vapor, or Hummingbird without `WebAuthnServer`).
///
/// Log the error itself (its code, message and step are for the operator) and answer with
/// ``clientFacing(_:requestID:)``:
///
/// ```swift
/// do {
///     let login = try await engine.finishAuthentication(json: body, binding: binding)
/// } catch {
///     logger.info("sign-in failed", metadata: ["code": "\(error.code)", "detail": "\(error.message)"])
///     let shown = error.clientFacing(.authentication)
///     return Response(status: shown.httpStatus, json: ["error": shown.code.rawValue, "message": shown.message])
/// }
/// ```
extension WebAuthnError {
    /// The ceremony step a failure ended, for ``clientFacing(_:requestID:)``.
    public enum ClientView: Sendable {
        /// A registration (options or result): its failures are the user's own to see.
        case registration
        /// A sign-in's result: past the response's own shape, every failure reads the same.
        case authentication
    }

    /// Sign-in failures a client may see in detail: those decided before the credential is looked
    /// up, which say nothing about which credentials or accounts exist.
    public static let shownBeforeCredentialLookup: Set<Code> = [
        .jsonMalformed, .responseMalformed, .requestMalformed, .base64urlInvalid, .inputTooLarge, .credentialTypeInvalid, .credentialIdMismatch,
        .clientDataMalformed, .challengeUnknown, .challengeExpired, .ceremonyMismatch, .sessionMismatch,
    ]

    /// The server's own failures (its store, its configuration, the crypto library): never the
    /// client's doing, and their detail is for the log only.
    public static let serverSide: Set<Code> = [.storageFailure, .cryptoFailure, .internalError, .configurationInvalid]

    /// This failure as the client that caused it may see it:
    /// - the server's own failures (``serverSide``) become `internal_error`, saying only that the
    ///   server failed (with `requestID`, for a support request, when given);
    /// - a sign-in that failed after its credential was looked up (an unknown credential,
    ///   another account's, a bad signature, a counter that went back, wrong flags for a real
    ///   credential) becomes `authentication_failed`: a detailed answer would tell a stranger
    ///   which credentials and accounts exist (WebAuthn L3 §14.6);
    /// - every other failure is shown as it is.
    ///
    /// (`crypto_failure` in a sign-in is folded too: an answer that differed between a real
    /// credential and a stand-in would be an oracle.)
    public func clientFacing(_ view: ClientView, requestID: String? = nil) -> WebAuthnError {
        let folded = view == .authentication && !Self.shownBeforeCredentialLookup.contains(code)
        if Self.serverSide.contains(code) && !(folded && code == .cryptoFailure) {
            return WebAuthnError(.internalError, requestID.map { "the server failed; quote request id \($0)" } ?? "the server failed")
        }
        if folded { return WebAuthnError(.authenticationFailed, "the credential could not be verified for this sign-in") }
        return self
    }

    /// The HTTP status code this failure answers with: 400 for a malformed or refused request,
    /// 401 when the credential or the session does not authenticate, 403 for another session's
    /// ceremony, 409 for a conflict with what is stored (a taken name, a full account), 413, 415,
    /// 429, 503 when the server holds too many pending ceremonies, 500 for ``serverSide``.
    public var httpStatus: Int {
        switch code {
        case .inputTooLarge: return 413
        case .storageFailure, .cryptoFailure, .internalError, .configurationInvalid: return 500
        case .signatureInvalid, .credentialNotOwnedByUser, .userHandleMismatch, .counterRegression, .authenticationFailed, .signInRequired,
            .reauthenticationRequired:
            return 401
        case .sessionMismatch: return 403
        case .usernameUnavailable, .credentialLimitReached, .lastCredential: return 409
        case .contentTypeUnsupported: return 415
        case .rateLimited: return 429
        case .notFound: return 404
        case .methodNotAllowed: return 405
        case .tooManyPendingCeremonies: return 503
        default: return 400
        }
    }
}
