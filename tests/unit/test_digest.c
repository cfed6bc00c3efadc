/*
 * test_digest.c -- uploaders/digest.c against published vectors: MD5 and
 * SHA-256 (FIPS 180 / RFC 1321 "abc"), HMAC-SHA256 (RFC 4231 case 2),
 * CRC32C (the Castagnoli check value and RFC 3720 B.4), base64 (RFC 4648
 * section 10) and RFC 3986 percent-encoding and decoding as the stores
 * sign with them.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "digest.h"

static void test_md5_sha256(void **state)
{
    char b64[25], hex[33], sha[65];

    (void)state;
    ckpt__md5_base64("abc", 3, b64);
    assert_string_equal(b64, "kAFQmDzST7DWlj99KOF/cg==");
    ckpt__md5_hex("abc", 3, hex);
    assert_string_equal(hex, "900150983cd24fb0d6963f7d28e17f72");
    ckpt__md5_hex("", 0, hex);
    assert_string_equal(hex, "d41d8cd98f00b204e9800998ecf8427e");
    ckpt__sha256_hex("abc", 3, sha);
    assert_string_equal(sha, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    ckpt__sha256_hex("", 0, sha);
    assert_string_equal(sha, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

static void test_hmac_sha256(void **state)
{
    static const unsigned char want[32] = {
        0x5b, 0xdc, 0xc1, 0x46, 0xbf, 0x60, 0x75, 0x4e, 0x6a, 0x04, 0x24, 0x26, 0x08, 0x95, 0x75, 0xc7,
        0x5a, 0x00, 0x3f, 0x08, 0x9d, 0x27, 0x39, 0x83, 0x9d, 0xec, 0x58, 0xb9, 0x64, 0xec, 0x38, 0x43
    };
    const char *msg = "what do ya want for nothing?";
    unsigned char mac[32];

    (void)state;
    ckpt__hmac_sha256("Jefe", 4, msg, strlen(msg), mac);
    assert_memory_equal(mac, want, 32);
}

static void test_crc32c(void **state)
{
    unsigned char ones[32];
    char crc[9] = "";

    (void)state;
    memset(ones, 0xff, sizeof ones);
#ifdef CKPT_HAVE_ISAL
    assert_int_equal(ckpt__crc32c_base64("123456789", 9, crc), 1);
    assert_string_equal(crc, "4waSgw==");      /* 0xE3069283 */
    assert_int_equal(ckpt__crc32c_base64(ones, sizeof ones, crc), 1);
    assert_string_equal(crc, "YqirQw==");      /* 0x62A8AB43 */
#else
    assert_int_equal(ckpt__crc32c_base64(ones, sizeof ones, crc), 0);
    assert_string_equal(crc, "");
    skip();
#endif
}

static void test_base64(void **state)
{
    static const char *const plain[] = { "", "f", "fo", "foo", "foob", "fooba", "foobar" };
    static const char *const enc[] = { "", "Zg==", "Zm8=", "Zm9v", "Zm9vYg==", "Zm9vYmE=",
                                       "Zm9vYmFy" };
    char out[16];
    unsigned char dec[16];

    (void)state;
    for (size_t i = 0; i < sizeof plain / sizeof plain[0]; i++) {
        ckpt__base64_encode(plain[i], strlen(plain[i]), out);
        assert_string_equal(out, enc[i]);
        assert_int_equal(ckpt__base64_decode(enc[i], dec), (long)strlen(plain[i]));
        assert_memory_equal(dec, plain[i], strlen(plain[i]));
    }
    assert_int_equal(ckpt__base64_decode("Zm9", dec), -1);  /* not a multiple of 4 */
    assert_int_equal(ckpt__base64_decode("Zm!v", dec), -1); /* not the alphabet */
}

static void test_uri_encode(void **state)
{
    char *e;

    (void)state;
    e = ckpt__uri_encode("a b/c~d+\xc3\xa9", 10, 1);
    assert_string_equal(e, "a%20b/c~d%2B%C3%A9");
    free(e);
    e = ckpt__uri_encode("a/b=", 4, 0);
    assert_string_equal(e, "a%2Fb%3D");
    free(e);
    e = ckpt__uri_encode("AZaz09-_.~", 10, 0);
    assert_string_equal(e, "AZaz09-_.~");
    free(e);
    e = ckpt__uri_encode("", 0, 0);
    assert_string_equal(e, "");
    free(e);
}

static void test_uri_decode(void **state)
{
    char out[32];

    (void)state;
    assert_int_equal(ckpt__uri_decode("a%20b%2fc%C3%A9", 15, out), 7);
    assert_string_equal(out, "a b/c\xc3\xa9");
    /* '+' is no space here; a '%' without two hex digits stays */
    assert_int_equal(ckpt__uri_decode("1+1%", 4, out), 4);
    assert_string_equal(out, "1+1%");
    assert_int_equal(ckpt__uri_decode("%zz%4", 5, out), 5);
    assert_string_equal(out, "%zz%4");
}

static void test_wipe(void **state)
{
    char buf[8] = "secret";
    char *s = strdup("key");

    (void)state;
    ckpt__wipe(buf, sizeof buf);
    for (size_t i = 0; i < sizeof buf; i++)
        assert_int_equal(buf[i], 0);
    ckpt__wipe_free(s);
    ckpt__wipe_free(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_md5_sha256),
        cmocka_unit_test(test_hmac_sha256),
        cmocka_unit_test(test_crc32c),
        cmocka_unit_test(test_base64),
        cmocka_unit_test(test_uri_encode),
        cmocka_unit_test(test_uri_decode),
        cmocka_unit_test(test_wipe),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
