/* sgrt — symbol visibility. The library is built with -fvisibility=hidden;
 * only declarations marked SG_API are exported. */
#ifndef SGRT_EXPORT_H
#define SGRT_EXPORT_H

#if defined(SG_STATIC_DEFINE)
#define SG_API
#elif defined(__GNUC__) || defined(__clang__)
#define SG_API __attribute__((visibility("default")))
#else
#define SG_API
#endif

#ifdef __cplusplus
#define SG_EXTERN_C_BEGIN extern "C" {
#define SG_EXTERN_C_END }
#else
#define SG_EXTERN_C_BEGIN
#define SG_EXTERN_C_END
#endif

#endif /* SGRT_EXPORT_H */
