/// The numbers of the COSE_Key structure (RFC 9052 §7), named once for the code
/// that reads keys (WebAuthnCore's `COSEKey`) and writes them (`SigningKey`).
package enum COSE {
    /// COSE_Key map labels: the common ones (RFC 9052 §7.1), then the key type
    /// parameters (EC2 and OKP: RFC 9053 §7.1–7.2; RSA: RFC 8230 §4). Parameter
    /// labels of different key types overlap (-1 is `crv` for EC2 and OKP, `n` for RSA).
    package enum Label {
        /// `kty`, the key type (``COSE/KeyType``).
        package static let kty = 1
        /// `alg`, the algorithm (``COSEAlgorithm``).
        package static let alg = 3
        /// EC2 and OKP `crv`: the curve.
        package static let crv = -1
        /// EC2 `x` coordinate; OKP public key.
        package static let x = -2
        /// EC2 `y` coordinate.
        package static let y = -3
        /// EC2 and OKP `d`: the private key.
        package static let d = -4
        /// RSA `n`: the modulus.
        package static let n = -1
        /// RSA `e`: the public exponent.
        package static let e = -2
        /// RSA `d`: the private exponent.
        package static let rsaD = -3
        /// RSA `p`: the first prime factor.
        package static let rsaP = -4
        /// AKP `pub`: the ML-DSA public key.
        package static let akpPub = -1
        /// AKP `priv`: the private key (seed).
        package static let akpPriv = -2
    }

    /// `kty` values (IANA "COSE Key Types").
    package enum KeyType {
        /// Octet key pair (EdDSA keys).
        package static let okp = 1
        /// Elliptic curve keys with x and y coordinates.
        package static let ec2 = 2
        /// RSA keys.
        package static let rsa = 3
        /// Algorithm key pair (ML-DSA; draft-ietf-cose-dilithium).
        package static let akp = 7
    }
}
