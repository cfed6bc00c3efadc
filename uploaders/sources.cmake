# uploaders/sources.cmake -- the store's sources and public headers, included
# by the top-level CMakeLists.txt once CKPT_STORE_SRC holds the dispatch and
# the file backend and curl/expat were looked for (CKPT_WITH_S3/AZURE are off
# when they were not found).
#
#   store.c, file.c       the interface (../include/ckpt_store.h), file://
#   backend.c             key checks, error details: what every backend
#                         and the transport lean on
#   retryctl.c            the process-wide retry controls (ckpt_store.h),
#                         built whatever backends are
#   objstore.c, objops.c  the object-store core, shared by S3/GCS and Azure
#   http.c, retry.c       the HTTP transport (include/ckpt_http.h, internal), retries
#   xml.c, digest.c       reply parsing; digests and encodings
#   s3*.c, sigv4.c,       the S3/GCS dialect, SigV4, AWS credentials
#     creds_aws.c, imds.c   (instance roles through IMDSv2)
#   azure*.c,             the Azure dialect, SharedKey, Azure credentials
#     creds_azure.c
list(APPEND CKPT_STORE_SRC uploaders/backend.c uploaders/retryctl.c)
if(CKPT_WITH_S3 OR CKPT_WITH_AZURE)
  list(APPEND CKPT_STORE_SRC
    uploaders/objstore.c uploaders/objops.c uploaders/http.c uploaders/retry.c
    uploaders/xml.c uploaders/digest.c)
endif()
if(CKPT_WITH_S3)
  list(APPEND CKPT_STORE_SRC
    uploaders/s3.c uploaders/s3_open.c uploaders/sigv4.c uploaders/creds_aws.c
    uploaders/imds.c)
endif()
if(CKPT_WITH_AZURE)
  list(APPEND CKPT_STORE_SRC
    uploaders/azure.c uploaders/azure_sign.c uploaders/creds_azure.c)
endif()
# The IMDS client is also listed for ckptrun's AWS notices whenever curl is
# linked: once is enough.
list(REMOVE_DUPLICATES CKPT_STORE_SRC)

# The public header: the store interface (include/ckpt_store.h at the top of
# the tree). uploaders/include/ckpt_http.h (the HTTP transport) is internal:
# ckptrun includes it from the tree, nothing installs it (its header says
# why).
install(FILES ${CMAKE_SOURCE_DIR}/include/ckpt_store.h
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
