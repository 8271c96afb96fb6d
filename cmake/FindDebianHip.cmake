# Finds the HIP headers of Debian's libamdhip64-dev (HIP 5.2). The hip backend needs only the
# headers at build time: libamdhip64 (which also carries hipRTC) is dlopen'ed at run time.
find_path(MEGAMOE_HIP_INCLUDE_DIR hip/hiprtc.h HINTS /opt/rocm/include)
if(MEGAMOE_HIP_INCLUDE_DIR)
  set(MEGAMOE_HIP_FOUND TRUE)
  message(STATUS "megamoe: hip backend enabled (headers in ${MEGAMOE_HIP_INCLUDE_DIR})")
else()
  set(MEGAMOE_HIP_FOUND FALSE)
  message(STATUS "megamoe: hip backend disabled (no hip/hiprtc.h; apt-get install libamdhip64-dev)")
endif()
