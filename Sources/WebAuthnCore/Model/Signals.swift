public import _WebAuthnEncoding

/// A call the page should make to the Signals API (WebAuthn L3 §5.1.10), so that
/// the user's passkey provider stays in step with the relying party: it hides a
/// credential the server no longer knows, keeps only the account's accepted
/// credentials, and shows the account's current names.
///
/// The server produces the value; the page passes ``options`` to the static
/// method named ``method`` of `PublicKeyCredential` when the browser has it:
///
/// ```js
/// if (PublicKeyCredential[signal.method]) await PublicKeyCredential[signal.method](signal.options);
/// ```
///
/// Signals are hints to the provider, never a security boundary: the server
/// refuses an unknown or deleted credential whatever the provider does.
public enum CredentialSignal: Sendable, Equatable {
    /// After a sign-in with a credential the server does not know (never registered, or deleted):
    /// `signalUnknownCredential({rpId, credentialId})`.
    case unknownCredential(credentialId: [UInt8])
    /// After the account's credentials changed (one deleted): `signalAllAcceptedCredentials({rpId, userId, allAcceptedCredentialIds})`.
    case allAcceptedCredentials(userHandle: [UInt8], credentialIds: [[UInt8]])
    /// After the account's names changed: `signalCurrentUserDetails({rpId, userId, name, displayName})`.
    case currentUserDetails(user: UserEntity)

    /// The `PublicKeyCredential` static method to call.
    public var method: String {
        switch self {
        case .unknownCredential: "signalUnknownCredential"
        case .allAcceptedCredentials: "signalAllAcceptedCredentials"
        case .currentUserDetails: "signalCurrentUserDetails"
        }
    }

    /// The method's argument for relying party `rpId`, as JSON (byte strings in base64url, as the API takes them).
    public func optionsJSON(rpId: String) -> String { options(rpId: rpId).serialized() }

    /// `{"method": …, "options": …}`, the form the server's routes return.
    public func json(rpId: String) -> String { payload(rpId: rpId).serialized() }

    package func options(rpId: String) -> JSONValue {
        switch self {
        case .unknownCredential(let id):
            return ["rpId": .string(rpId), "credentialId": .string(Base64URL.encode(id))]
        case .allAcceptedCredentials(let handle, let ids):
            return [
                "rpId": .string(rpId), "userId": .string(Base64URL.encode(handle)),
                "allAcceptedCredentialIds": .array(ids.map { .string(Base64URL.encode($0)) }),
            ]
        case .currentUserDetails(let user):
            return [
                "rpId": .string(rpId), "userId": .string(Base64URL.encode(user.id)), "name": .string(user.name),
                "displayName": .string(user.displayName),
            ]
        }
    }

    package func payload(rpId: String) -> JSONValue { ["method": .string(method), "options": options(rpId: rpId)] }
}

extension WebAuthnEngine {
    /// The signal that lists the account's credentials as they are now (call after deleting one).
    ///
    /// - Parameter userHandle: The account.
    /// - Throws: `storage_failure` when the store fails.
    public func allAcceptedCredentialsSignal(userHandle: [UInt8]) async throws(WebAuthnError) -> CredentialSignal {
        let records = try await store { try await credentials.credentials(forUser: userHandle) }
        return .allAcceptedCredentials(userHandle: userHandle, credentialIds: records.map(\.id))
    }
}
