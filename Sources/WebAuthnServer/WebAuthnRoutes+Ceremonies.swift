internal import Foundation
internal import Hummingbird
internal import WebAuthnCore
internal import _WebAuthnEncoding
internal import _WebAuthnCrypto

// The four ceremony handlers of the FIDO2 server API: registration and authentication,
// options and result.
extension WebAuthnRoutes {
    // MARK: Registration

    func attestationOptions<Context: RequestContext>(_ request: Request, _ context: Context) async throws -> Response {
        let body = try RequestMembers(await HTTP.body(request, limit: configuration.maxBodySize))
        guard let raw = try body.string("username"), !raw.isEmpty else {
            throw WebAuthnError(.requestMalformed, "username is missing or empty")
        }
        let name = try UserName.normalize(name: raw)
        let displayName = try body.string("displayName").flatMap { $0.isEmpty ? nil : $0 }.map { try UserName.normalize(displayName: $0) } ?? name
        let token = sessions.token(request)
        let signedIn = try await signedInAccount(request, token: token)
        let existing = try await accounts.account(named: name)
        let allowed =
            configuration.conformance
            ? true : await configuration.mayEnroll(EnrollmentRequest(name: name, existingAccount: existing, signedInAs: signedIn))
        guard allowed else {
            audit("enrollment_refused", request, context, ["account": .string(Audit.hash(existing?.id ?? []))])
            // One answer whether or not the name is an account's: a server that lets no stranger
            // sign up (`signedInOwnerOnly`) would otherwise tell anyone which names exist (red
            // team, ninth pass). Where new names are open, a 409 for a name says it is taken anyway.
            throw WebAuthnError(
                .usernameUnavailable, "this session may not enroll a passkey under this name; to add one to an account, sign in as it first")
        }
        // A new name creates nothing now: the account is made with its first credential.
        let user = try existing ?? UserEntity(id: SecureRandom.bytes(32), name: name, displayName: displayName)
        var selection = AuthenticatorSelection(userVerification: engine.relyingParty.policy.userVerification)
        var requested: JSONObject?
        if let asked = try body.object("authenticatorSelection") {
            // Its members' types (unknown strings are ignored, as a browser ignores unknown enumeration values).
            let members = try RequestMembers(.object(asked))
            for name in ["userVerification", "authenticatorAttachment", "residentKey"] { _ = try members.string(name) }
            _ = try members.bool("requireResidentKey")
            (selection, requested) = AuthenticatorSelection.requested(asked, over: selection)
        }
        let attestation = AttestationConveyancePreference(rawValue: try body.string("attestation") ?? "none")
        guard AttestationConveyancePreference.specified.contains(attestation) else {
            throw WebAuthnError(.requestMalformed, "attestation \"\(attestation.rawValue.prefix(32))\" is not none, indirect, direct or enterprise")
        }
        let extensions = ClientExtensions(try body.object("extensions") ?? JSONObject())
        // Typed, known values only, echoed in the order asked (at most a handful).
        let hints = (try body.strings("hints") ?? []).prefix(8).map(PublicKeyCredentialHint.init(rawValue:))
            .filter(PublicKeyCredentialHint.specified.contains)
        let formats = (try body.strings("attestationFormats") ?? []).prefix(16).map(AttestationFormat.init(rawValue:))
            .filter(AttestationFormat.specified.contains)
        // Adding a passkey to an existing account is a sensitive action: the session must have
        // verified the user recently (a UV sign-in or re-authentication, Sign in with Apple). An
        // account signed in only through the host's own `signedInAccount` hook is the host's to vouch for.
        if !configuration.conformance, let existing, signedIn == existing.id {
            if let session = try await sessions.signedIn(token, now: now), session.userHandle == existing.id {
                try requireRecent(session)
            } else if configuration.signedInAccount == nil {
                throw WebAuthnError(.signInRequired, "sign in first")
            }
        }
        // Conditional create (a quiet passkey upgrade) only for the signed-in owner of an existing account.
        let conditionalCreate = try body.string("mediation") == "conditional" && existing != nil && signedIn == existing?.id
        let session = token ?? sessions.mint()
        let options = try await engine.startRegistration(
            user: user, authenticatorSelection: selection, attestation: attestation, hints: Array(hints), attestationFormats: Array(formats),
            extensions: extensions, newAccount: existing == nil, addingToAccount: existing != nil,
            conditionalCreate: conditionalCreate, binding: session.binding)
        var payload = options.json.objectValue ?? JSONObject()
        if let requested {
            // The conformance API echoes the selection asked for; the ceremony uses its L3 effective values.
            payload["authenticatorSelection"] = .object(requested)
        }
        return HTTP.ok(payload, cookie: sessions.cookie(session))
    }

    func attestationResult<Context: RequestContext>(_ request: Request, _ context: Context) async throws -> Response {
        let body = try await HTTP.body(request, limit: configuration.maxBodySize)
        let token = sessions.token(request)
        let result: RegistrationResult
        // Who is signed in afterwards, and verified how: a new account's first credential is the
        // account's only proof so far (verified). A credential added to an existing account proves
        // nothing about its user (the authenticator is whoever's holds the session): the session
        // keeps the standing it had. The addition must still be allowed as its options were, by
        // the session finishing it: one ended since (signed out, signed out everywhere, ended by a
        // credential's deletion) adds nothing, even with a ceremony stored after its ceremonies
        // were dropped (red team, sixth pass: options in flight while the session ended). A
        // session ending after this check takes the ceremony with it, and the commit then finds
        // none. The session is stored with the registration, in its transaction when the session
        // store is the engine's store.
        let signedIn = sessions.mint()
        let now = self.now
        let signingIn = SessionSignIn<RegistrationResult>(store: sessions.store, replacing: token?.binding) { [self] result in
            // Called after every check, step 27 too (a real ID is refused there): a stand-in ID is
            // refused at the same point, with the same answer, so registration cannot tell the two
            // apart (checked before the verification, a stand-in ID with any body answered "taken").
            if standIns.isStandIn(result.credential.id) {
                throw WebAuthnError(
                    .credentialAlreadyRegistered, "credential \(Base64URL.encode(result.credential.id).prefix(96)) is already registered",
                    step: "WebAuthn L3 §7.1 step 27")
            }
            let handle = result.credential.userHandle
            if result.createdAccount { return sessions.session(for: handle, token: signedIn, now: now, verified: true) }
            let previous = try await sessions.signedIn(token, now: now)
            if !configuration.conformance, let account = try await accounts.account(handle: handle) {
                let signedInAs: [UInt8]?
                if let hook = configuration.signedInAccount, let host = await hook(request) { signedInAs = host } else { signedInAs = previous?.userHandle }
                guard await configuration.mayEnroll(EnrollmentRequest(name: account.name, existingAccount: account, signedInAs: signedInAs)) else {
                    throw WebAuthnError(.signInRequired, "the session that started this addition has ended; sign in again")
                }
                // And the recent verification its options needed, again now: else options asked for
                // at the window's end stretched it by the challenge's lifetime (red team, thirteenth
                // pass: a 30 s window, options at 25 s, the passkey stored at 45 s).
                if let previous, previous.userHandle == handle, signedInAs == handle { try requireRecent(previous) }
            }
            let sameAccount = previous?.userHandle == handle
            let stillVerified =
                sameAccount && previous.map { now.timeIntervalSince($0.authenticatedAt) <= configuration.reauthenticationWindow } == true
            return sessions.session(for: handle, token: signedIn, now: now, verified: stillVerified, since: sameAccount ? previous?.createdAt : nil)
        }
        let attempt = try beginAttempt(token, request, context)
        do throws(WebAuthnError) {
            let response = try RegistrationResponse(json: body)
            result = try await engine.finishRegistration(response, binding: token?.binding, signingIn: signingIn)
        } catch {
            audit("registration_failed", request, context, ["code": .string(error.code.rawValue)])
            settleAttempt(attempt, failure: error.code)
            throw error
        }
        settleAttempt(attempt)
        await sessions.sweepIfDue(now: now)
        audit(
            "registered", request, context,
            [
                "account": .string(Audit.hash(result.credential.userHandle)),
                "credential": .string(Audit.hash(result.credential.id)), "fmt": .string(result.format.rawValue),
            ])
        return HTTP.ok(
            [
                "credentialId": .string(Base64URL.encode(result.credential.id)),
                "discoverable": result.credential.properties.discoverable.map(JSONValue.bool) ?? .null,
                "fmt": .string(result.format.rawValue),
                "attestationType": .string(result.attestationType.rawValue),
                "trusted": .bool(result.trust.trusted),
            ], cookie: sessions.cookie(signedIn))
    }

    // MARK: Authentication

    func assertionOptions<Context: RequestContext>(_ request: Request, _ context: Context) async throws -> Response {
        let body = try RequestMembers(await HTTP.body(request, limit: configuration.maxBodySize))
        var userHandle: [UInt8]?
        var allow: [CredentialDescriptor]?
        if let raw = try body.string("username"), !raw.isEmpty {
            // The same work for every name: one lookup of the account with its credentials.
            // A name that breaks the rules cannot exist: every such name gets one stand-in.
            let name = (try? UserName.normalize(name: raw)) ?? "\u{FFFD}"
            let found = try await accounts.account(named: name, withCredentialsIn: engine.credentials)
            if found == nil, (accounts as AnyObject) !== (engine.credentials as AnyObject) {
                // Separate stores read the account, then its credentials: a name without an
                // account costs the same second read, for a stand-in's handle.
                _ = try await engine.credentials.credentials(forUser: standIns.userHandle(for: name))
            }
            let handle = found?.account.id ?? standIns.userHandle(for: name)
            let records = found?.credentials ?? []
            if records.isEmpty {
                if configuration.conformance {
                    throw WebAuthnError(.credentialUnknown, "no account named \(raw.prefix(64)) with a credential")
                }
                userHandle = standIns.userHandle(for: name)
                allow = standIns.credentials(for: name)
            } else {
                userHandle = handle
                allow = records.map { CredentialDescriptor(id: $0.id, transports: $0.transports) }
            }
        }
        let uv = try body.string("userVerification").flatMap(UserVerificationRequirement.init(rawValue:))
        let extensions = ClientExtensions(try body.object("extensions") ?? JSONObject())
        // As at registration: typed, known values only, echoed in the order asked. A page that
        // signs in with security keys asks for `security-key`, and the browser goes to them first.
        let hints = (try body.strings("hints") ?? []).prefix(8).map(PublicKeyCredentialHint.init(rawValue:))
            .filter(PublicKeyCredentialHint.specified.contains)
        let session = sessions.token(request) ?? sessions.mint()
        // `mediation` is the page's business: user presence is required whatever it says.
        let options = try await engine.startAuthentication(
            userHandle: userHandle, userVerification: uv, hints: Array(hints), extensions: extensions,
            binding: session.binding, allowCredentials: allow)
        return HTTP.ok(options.json.objectValue ?? JSONObject(), cookie: sessions.cookie(session))
    }

    /// Sign-in failures a client may see in detail: those decided before the
    /// credential is looked up, which say nothing about which credentials or
    /// accounts exist. Every other failure (unknown credential, another
    /// account's, wrong origin or flags for a real one, bad signature, ...)
    /// answers `authentication_failed`; the log has the code. `--conformance`
    /// shows every code, as the conformance tools expect.
    /// (``WebAuthnError/shownBeforeCredentialLookup``, public for servers of their own.)
    static var shownBeforeLookup: Set<WebAuthnError.Code> { WebAuthnError.shownBeforeCredentialLookup }

    /// The server's own failures (its store, its configuration): not the credential's, so not
    /// folded into `authentication_failed` nor counted against the session; they answer
    /// `500 internal_error` with the request id, the detail in the log and the store-errors
    /// metric. (`crypto_failure` stays folded: it is not reachable from a client's bytes in an
    /// assertion today, and an answer that differed for real and stand-in credentials would be an oracle.)
    static let serverFailures: Set<WebAuthnError.Code> = [.storageFailure, .internalError, .configurationInvalid]

    func assertionResult<Context: RequestContext>(_ request: Request, _ context: Context) async throws -> Response {
        let body = try await HTTP.body(request, limit: configuration.maxBodySize)
        let token = sessions.token(request)
        let result: AuthenticationResult
        var presented: [UInt8]?
        // The new session is stored with the sign-in, in its transaction when the session store is
        // the engine's store: the result step is one read and one durable write.
        let signedIn = sessions.mint()
        let now = self.now
        let signingIn = SessionSignIn<AuthenticationResult>(store: sessions.store, replacing: token?.binding) { [self] result in
            sessions.session(
                for: result.userHandle, token: signedIn, now: now, verified: try await verifiesUser(result.userVerified, account: result.userHandle))
        }
        let attempt = try beginAttempt(token, request, context)
        do throws(WebAuthnError) {
            let response = try AuthenticationResponse(json: body)
            presented = response.id
            result = try await engine.finishAuthentication(response, binding: token?.binding, signingIn: signingIn)
        } catch {
            audit("sign_in_failed", request, context, ["code": .string(error.code.rawValue)])
            settleAttempt(attempt, failure: error.code)
            if Self.serverFailures.contains(error.code) { throw error }
            if !configuration.conformance && !Self.shownBeforeLookup.contains(error.code) {
                let failed = WebAuthnError(.authenticationFailed, "the credential could not be verified for this sign-in")
                // A credential the server does not know (deleted, or never registered): the page
                // asks the provider to hide it (Signals API). Only after the ceremony's own checks,
                // and never for a stand-in ID: those answer like a real credential's, or the signal
                // would tell a stranger which names have no account (L3 §14.6.2).
                if error.code == .credentialUnknown, let presented, !standIns.isStandIn(presented) {
                    throw SignalledFailure(
                        error: failed, signal: CredentialSignal.unknownCredential(credentialId: presented).payload(rpId: engine.relyingParty.id))
                }
                throw failed
            }
            throw error
        }
        settleAttempt(attempt)
        await sessions.sweepIfDue(now: now)
        audit(
            "signed_in", request, context,
            [
                "account": .string(Audit.hash(result.userHandle)), "credential": .string(Audit.hash(result.credentialId)),
                "uv": .string(String(result.userVerified)),
            ])
        return HTTP.ok(
            [
                "credentialId": .string(Base64URL.encode(result.credentialId)),
                "signCount": .number(Double(result.signCount)),
                "userVerified": .bool(result.userVerified),
                // A re-audit flagged the credential (its authenticator is reported compromised): it signed in, per policy.
                "flagged": result.flag.map { .string($0.reason) } ?? .null,
            ], cookie: sessions.cookie(signedIn))
    }
}
