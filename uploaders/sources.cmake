# Object-store backends (issue 5), included by the top-level CMakeLists.txt
# after CKPT_STORE_SRC is set and curl/expat were found.
if(CKPT_WITH_S3 OR CKPT_WITH_AZURE)
  # Shared by both: HTTP pool, retry policy, XML front end, digests/SigV4.
  list(APPEND CKPT_STORE_SRC
    uploaders/http.c uploaders/retry.c uploaders/xml.c uploaders/sigv4.c)
endif()
if(CKPT_WITH_S3)
  list(APPEND CKPT_STORE_SRC uploaders/s3.c)
endif()
if(CKPT_WITH_AZURE)
  list(APPEND CKPT_STORE_SRC uploaders/azure.c)
endif()
# Instance-role credentials for s3:// come from the IMDSv2 client, which the
# spot-notice poller shares (one client per process).
# (The top-level CMakeLists may have listed it already.)
if(CKPT_WITH_S3 AND NOT "uploaders/imds.c" IN_LIST CKPT_STORE_SRC)
  list(APPEND CKPT_STORE_SRC uploaders/imds.c)
endif()
