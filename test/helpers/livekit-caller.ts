/**
 * A caller for end-to-end LiveKit tests: the SDK's `LivekitRoomFactory` on @livekit/rtc-node
 * (the Node side of LiveKit), publishing the audio the test sends and decoding the agent's
 * track to 16 kHz mono. Needs a LiveKit server (LIVEKIT_URL).
 */
import * as rtc from '@livekit/rtc-node';
import type { LivekitRoom, LivekitRoomFactory } from '../../src/client/index.ts';

export function rtcNodeRoomFactory(): LivekitRoomFactory {
  return (): LivekitRoom => {
    const room = new rtc.Room();
    const source = new rtc.AudioSource(16_000, 1, 1000);
    let leftByUs = false;
    return {
      async connect(url, token, h) {
        room.on('dataReceived', (payload, p, _kind, topic) => h.data(topic, payload, p?.identity));
        room.on('participantAttributesChanged', (changed, p) => h.attributes(changed, p.identity));
        room.on('trackSubscribed', (track) => {
          if (track.kind !== rtc.TrackKind.KIND_AUDIO) return;
          (async () => {
            for await (const frame of new rtc.AudioStream(track, { sampleRate: 16_000, numChannels: 1 })) h.audio(frame.data);
          })().catch(() => {});
        });
        room.on('reconnecting', () => h.reconnecting());
        room.on('reconnected', () => h.reconnected());
        room.on('disconnected', () => h.disconnected(leftByUs));
        room.registerTextStreamHandler('lk.transcription', (reader, from) => {
          reader.readAll().then((text) => h.text('lk.transcription', text, reader.info.attributes ?? {}, from.identity), () => {});
        });
        try {
          await room.connect(url, token, { autoSubscribe: true, dynacast: false });
        } catch (err) {
          throw Object.assign(err as object, { unauthorized: /401|not ?allowed|unauthori[sz]ed/i.test(String((err as Error)?.message)) });
        }
        for (const p of room.remoteParticipants.values()) h.attributes(p.attributes, p.identity);
        const track = rtc.LocalAudioTrack.createAudioTrack('microphone', source);
        await room.localParticipant!.publishTrack(track, new rtc.TrackPublishOptions({ source: rtc.TrackSource.SOURCE_MICROPHONE }));
        return { identity: room.localParticipant!.identity };
      },
      publishData: (topic, payload) => room.localParticipant!.publishData(payload, { reliable: true, topic }),
      sendAudio(pcm) {
        source.captureFrame(new rtc.AudioFrame(pcm, 16_000, 1, pcm.length)).catch(() => {});
      },
      async disconnect() {
        leftByUs = true;
        await source.close().catch(() => {});
        await room.disconnect();
      },
    };
  };
}
